// Package all registers every remedy of erplab: import it for its side
// effect (import _ "github.com/erplab/erplab/internal/remedy/all").
package all

import (
	_ "github.com/erplab/erplab/internal/remedy/rewriteproxy"
	_ "github.com/erplab/erplab/internal/remedy/settings"
	_ "github.com/erplab/erplab/internal/remedy/tempstyle"
	_ "github.com/erplab/erplab/internal/remedy/thp"
	_ "github.com/erplab/erplab/internal/remedy/tmpfs"
)
