package disk

import "unsafe"

// uintptrOf is the address of b's first byte, for O_DIRECT alignment.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
