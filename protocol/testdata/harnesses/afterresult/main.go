// afterresult sends an event after its result.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"afterresult"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n')
	fmt.Println(`{"type":"result","status":"ok"}`)
	fmt.Println(`{"type":"event","kind":"log","data":{"message":"one more thing"}}`)
}
