package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edl-nomad/edl/openapi/oas3"
)

func main() {
	dir := "openapi"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "openapi/gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	in, err := os.ReadFile(filepath.Join(dir, "swagger.json"))
	if err != nil {
		return err
	}
	j, y, err := oas3.Convert(in)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "openapi.yaml"), y, 0o644)
}
