package profile

import (
	"debug/elf"

	"golang.org/x/arch/x86/x86asm"
)

// probeOffset is where in fn, a function of the x86-64 ELF binary, its
// uprobe costs least while firing exactly as often as one at its entry:
// the first instruction of the entry block (up to its first jump, call
// or return, none of its later instructions the target of a branch in
// fn) that the kernel emulates (push of a register, a relative jump,
// conditional jump or call, a one-byte nop). Any other instruction is
// single-stepped out of line: a second trap that costs about 10 us in
// this VM against 1-2 us for an emulated one (docs/measurements/
// 2026-12-04-probe-overhead.md). 0 (the entry) when none qualifies or
// the binary cannot be read; probes that fetch arguments stay at 0
// (their registers).
func probeOffset(binary, fn string) int {
	code, ok := funcCode(binary, fn)
	if !ok {
		return 0
	}
	return cheapestOffset(code)
}

// cheapestOffset is probeOffset in a function's machine code.
func cheapestOffset(code []byte) int {
	targets := map[int]bool{}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			break
		}
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			targets[off+in.Len+int(rel)] = true
		}
		off += in.Len
	}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		switch {
		case err != nil, off > 0 && targets[off]:
			return 0
		case emulated(code[off:]):
			return off
		}
		if _, rel := in.Args[0].(x86asm.Rel); rel {
			return 0 // the entry block ends
		}
		switch in.Op {
		case x86asm.RET, x86asm.JMP, x86asm.CALL, x86asm.UD2, x86asm.HLT, x86asm.INT:
			return 0
		}
		off += in.Len
	}
	return 0
}

// emulated tells whether the kernel emulates the instruction at the
// start of b at a uprobe instead of single-stepping it
// (arch/x86/kernel/uprobes.c: relative jumps, conditional jumps and
// calls, a one-byte nop, and since Linux 6.x a push of a register).
func emulated(b []byte) bool {
	switch {
	case len(b) == 0:
		return false
	case b[0] >= 0x50 && b[0] <= 0x57, b[0] == 0x41 && len(b) > 1 && b[1] >= 0x50 && b[1] <= 0x57: // push reg
		return true
	case b[0] >= 0x70 && b[0] <= 0x7f, b[0] == 0xe8, b[0] == 0xe9, b[0] == 0xeb, b[0] == 0x90: // jcc, call, jmp, nop
		return true
	case b[0] == 0x0f && len(b) > 1 && b[1] >= 0x80 && b[1] <= 0x8f: // jcc rel32
		return true
	}
	return false
}

// funcCode reads the machine code of fn (a function symbol, static or
// dynamic) from the x86-64 ELF binary.
func funcCode(binary, fn string) ([]byte, bool) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return nil, false
	}
	var sym *elf.Symbol
	for _, list := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, _ := list()
		for i := range syms {
			if syms[i].Name == fn && elf.ST_TYPE(syms[i].Info) == elf.STT_FUNC && syms[i].Size > 0 {
				sym = &syms[i]
				break
			}
		}
		if sym != nil {
			break
		}
	}
	if sym == nil || sym.Size > 1<<20 {
		return nil, false
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_EXECINSTR != 0 && sym.Value >= s.Addr && sym.Value+sym.Size <= s.Addr+s.Size {
			code := make([]byte, sym.Size)
			if _, err := s.ReadAt(code, int64(sym.Value-s.Addr)); err != nil {
				return nil, false
			}
			return code, true
		}
	}
	return nil, false
}
