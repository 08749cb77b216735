//go:build !unix

package main

import "os"

// terminalSize reports no size where the terminal cannot be asked; the
// width falls back to $COLUMNS or 80.
func terminalSize(*os.File) (cols, rows int) { return 0, 0 }
