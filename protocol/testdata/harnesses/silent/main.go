// silent never says hello.
package main

import "time"

func main() { time.Sleep(time.Hour) }
