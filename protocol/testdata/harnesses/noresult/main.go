// noresult says hello, reads run.start, and exits with code 3.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"noresult"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n')
	fmt.Fprintln(os.Stderr, "boom: the model API refused the key")
	os.Exit(3)
}
