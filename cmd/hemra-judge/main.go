// Command hemra-judge is hemra's judge runtime: the program a judge's
// sandbox runs (a static binary alone in a FROM scratch image on docker, a
// process with an empty environment on local). It reads the job hemra
// wrote into its read-only inputs folder, asks the model through hemra's
// model gateway socket as the rubric says, and prints its verdict as one
// JSON object on stdout. See internal/judgeruntime.
//
//	hemra-judge /hemra/judge/in/job.json
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hemra-dev/hemra/internal/judgeruntime"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: hemra-judge JOB.json\n\nhemra's judge runtime; hemra runs it in a judge's sandbox.")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := judgeruntime.Run(ctx, os.Args[1])
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "hemra-judge:", err)
		os.Exit(1)
	}
}
