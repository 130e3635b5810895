// forker starts a child that would outlive it (holding its stdout), sends
// the child's pid in a log event and a result, and exits.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
)

func main() {
	fmt.Println(`{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"forker"}}`)
	bufio.NewReader(os.Stdin).ReadBytes('\n')
	child := exec.Command("sleep", "300")
	child.Stdout = os.Stdout // the child holds the protocol pipe open
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf(`{"type":"event","kind":"log","data":{"level":"info","message":"child %d"}}`+"\n", child.Process.Pid)
	fmt.Println(`{"type":"result","status":"ok","output":"left a child behind"}`)
}
