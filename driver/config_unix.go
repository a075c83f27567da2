//go:build unix

package driver

import (
	"os"
	"syscall"
)

func fileOwner(st os.FileInfo) (uint32, bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Uid, true
	}
	return 0, false
}
