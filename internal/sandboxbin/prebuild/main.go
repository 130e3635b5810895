// Command prebuild builds hemra's in-sandbox programs from the sources
// hemra embeds, laid out as internal/sandboxbin's cache, into a folder
// that `make build` then embeds (build tag hemra_prebuilt):
//
//	go run ./internal/sandboxbin/prebuild [-platform linux/amd64,...] DIR
//
// DIR is emptied first. The default platforms are linux on this machine's
// architecture (containers) and this machine's own platform (the local
// sandbox).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hemra-dev/hemra/internal/sandboxbin"
)

func main() {
	platforms := flag.String("platform", "", "comma-separated os/arch list (default: linux/<arch> and this machine's platform)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: prebuild [-platform os/arch,...] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	var ps []sandboxbin.Platform
	if *platforms == "" {
		ps = append(ps, sandboxbin.Linux())
		if h := sandboxbin.Host(); h != sandboxbin.Linux() {
			ps = append(ps, h)
		}
	} else {
		for _, s := range strings.Split(*platforms, ",") {
			p, err := sandboxbin.ParsePlatform(strings.TrimSpace(s))
			if err != nil {
				fmt.Fprintln(os.Stderr, "prebuild:", err)
				os.Exit(2)
			}
			ps = append(ps, p)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "prebuild:", err)
		os.Exit(1)
	}
	l := sandboxbin.New()
	l.CacheDir, l.NoPrebuilt = dir, true
	for _, name := range sandboxbin.Names() {
		for _, p := range ps {
			b, err := l.Get(context.Background(), name, p)
			if err != nil {
				fmt.Fprintln(os.Stderr, "prebuild:", err)
				os.Exit(1)
			}
			fmt.Printf("%s %s %s\n", b.Name, b.Platform, b.SHA256)
		}
	}
}
