package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/web"
)

// ServeCmd is `hemra serve`.
type ServeCmd struct {
	Listen string   `name:"listen" default:"127.0.0.1:7878" placeholder:"HOST:PORT" help:"Address to listen on. A non-loopback address is refused unless --expose."`
	Expose bool     `name:"expose" help:"Allow a non-loopback -listen address; every request then needs the random access token printed at start."`
	Plan   []string `name:"plan" sep:"none" placeholder:"FILE" help:"A saved plan (hemra plan -out FILE) to show, besides the *.hplan files at the top of the eval directory. Repeatable."`
}

func (c *ServeCmd) Help() string {
	return `Serves a read-only web view of the store: the runs (a page of a running
apply reloads itself as attempts finish), the eval × harness matrix with pass
rates, mean rewards and 95% intervals, each eval × harness task by task
(filters: failed, errored, passed, running, flipped against another harness),
each attempt (transitions, trajectory, verifier output, judges, files as
downloads), compare, and saved plans. Every page is also JSON: add .json to
its path, or send Accept: application/json.

It reads the store as a reader, so it runs beside hemra apply and never holds
it up. It sends nothing out. Anyone who can reach it can read the whole store,
including transcripts and artifacts: it listens on 127.0.0.1 by default, and
refuses any other address unless --expose, which then requires the random
access token it prints at start (open the printed URL, or send
Authorization: Bearer TOKEN).

Examples:

  hemra serve                                  # http://127.0.0.1:7878/
  hemra serve -listen 127.0.0.1:8080 -plan plan.hplan
  hemra serve -listen 0.0.0.0:7878 --expose    # prints the access token
  curl -s http://127.0.0.1:7878/matrix.json`
}

// serveHooks let tests run serve in-process: Context ends it, Listening
// is told its URL and token once it listens.
var serveHooks struct {
	Context   context.Context
	Listening func(url, token string)
}

func (c *ServeCmd) Run(g *Globals) error {
	if err := web.CheckListen(c.Listen, c.Expose); err != nil {
		return err
	}
	store, err := state.Open(g.StorePath(), state.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	plans := web.PlanSource{Dir: g.Dir}
	for _, p := range c.Plan {
		if !filepath.IsAbs(p) {
			if _, err := os.Stat(p); err != nil {
				p = filepath.Join(g.Dir, p)
			}
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("-plan %s: %w", p, err)
		}
		plans.Files = append(plans.Files, abs)
	}
	token := ""
	if c.Expose {
		token = web.NewToken()
	}
	srv, err := web.New(web.Options{Store: store, Plans: plans, Token: token, Exposed: c.Expose,
		Log: log.New(g.Stderr, "hemra serve: ", log.LstdFlags)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", c.Listen, err)
	}
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(g.Stdout, "Serving %s (read-only) at %s\n", relOrAbs(g.Dir, g.StorePath()), url)
	if c.Expose {
		fmt.Fprintf(g.Stdout, "\nWarning: --expose. Anyone who can reach %s and holds this token can read the\nwhole store, including transcripts and artifacts. Share it only with whom you would give the store.\n\n", ln.Addr())
		fmt.Fprintf(g.Stdout, "Access token: %s\nOpen: %s?token=%s\n", token, url, token)
	}
	fmt.Fprintln(g.Stdout, "Press Ctrl-C to stop.")

	ctx := serveHooks.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: log.New(g.Stderr, "hemra serve: ", log.LstdFlags)}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	if serveHooks.Listening != nil {
		serveHooks.Listening(url, token)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	fmt.Fprintln(g.Stdout, "Stopped.")
	return nil
}
