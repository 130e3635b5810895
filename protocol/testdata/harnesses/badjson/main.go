// badjson says hello, then sends a line that is not JSON.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"badjson"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n') // run.start
	fmt.Println(`{"type":"event","kind":"log","data":{"message":"half`)
	select {}
}
