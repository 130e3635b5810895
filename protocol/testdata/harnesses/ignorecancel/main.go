// ignorecancel says hello, then ignores run.cancel and SIGTERM.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signal.Ignore(syscall.SIGTERM)
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"ignorecancel"}}`)
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			fmt.Fprintf(os.Stderr, "ignoring %s", line)
		}
		if err != nil {
			select {}
		}
	}
}
