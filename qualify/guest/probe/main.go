package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"facts"}
	}
	run, ok := commands[args[0]]
	if !ok {
		usage(fmt.Errorf("unknown subcommand %q", args[0]))
	}
	// A closed stdout or stderr becomes EPIPE in the action's result rather
	// than killing the probe with SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	out, err := run(args[1:])
	if err != nil {
		usage(err)
	}
	emit(os.Stdout, out)
}

var commands map[string]func(args []string) (any, error)

func init() {
	commands = map[string]func([]string) (any, error){
		"facts":   func(args []string) (any, error) { return gather(), noArgs(args) },
		"alloc":   alloc,
		"fork":    fork,
		"write":   write,
		"echo":    echo,
		"spawn":   spawn,
		"sleep":   sleepAction,
		"fill":    fill,
		"connect": connect,
		"http":    httpGet,
		"tree":    tree,
	}
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	return nil
}

func emit(f *os.File, v any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	_, _ = f.Write(append(line, '\n'))
}

func usage(err error) {
	emit(os.Stderr, map[string]string{"error": err.Error(), "usage": "qualbox-probe [facts|alloc|fork|write|echo|spawn|sleep|fill|connect|http|tree] ..."})
	os.Exit(2)
}
