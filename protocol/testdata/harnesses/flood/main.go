// flood says hello, then sends events without end.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"flood"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n')
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, `{"type":"event","kind":"log","data":{"level":"info","message":"event %d of a flood"}}`+"\n", i); err != nil {
			return
		}
	}
}
