package floor

import "errors"

// ErrUnsupported is returned by Start on platforms without epoll.
var ErrUnsupported = errors.New("floor: the floor relay needs Linux (epoll)")
