// longline says hello, then sends one 2 MiB event line.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"longline"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n')
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, `{"type":"event","kind":"log","data":{"level":"info","message":"%s"}}`+"\n", strings.Repeat("a", 2<<20))
	w.Flush()
	select {}
}
