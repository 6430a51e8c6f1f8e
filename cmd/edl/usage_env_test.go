package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// `edl --help` said every flag can be set from EDL_*, but the client verbs
// read only EDL_SERVER and EDL_TOKEN (EDL_O=json edl ls printed a table).
// The usage names which commands read which, and each command's own --help
// agrees.
func TestUsageSaysWhichFlagsReadTheEnvironment(t *testing.T) {
	var usage bytes.Buffer
	if code := runMain([]string{"--help"}, &bytes.Buffer{}, &usage); code != 0 {
		t.Fatalf("edl --help: exit %d", code)
	}
	u := strings.Join(strings.Fields(usage.String()), " ")
	if strings.Contains(u, "Every flag can also be set") {
		t.Errorf("usage claims every flag reads EDL_*:\n%s", usage.String())
	}
	if !strings.Contains(u, "EDL_SERVER") || !strings.Contains(u, "EDL_TOKEN") {
		t.Errorf("usage does not say the client verbs read EDL_SERVER and EDL_TOKEN:\n%s", usage.String())
	}
	for name, c := range commands {
		if c.hidden || name == "version" {
			continue
		}
		args := []string{name, "--help"}
		switch name {
		case "sweep":
			args = []string{"sweep", "submit", "--help"}
		case "bench":
			args = []string{"bench", "api", "--help"}
		case "sim":
			args = []string{"sim", "--help"}
		}
		var out bytes.Buffer
		runMain(args, &out, &out)
		help := out.String()
		switch {
		case strings.Contains(help, "also from EDL_SERVER"):
			if !slices.Contains(clientVerbs, name) {
				t.Errorf("%s reads only EDL_SERVER/EDL_TOKEN but is not among the usage's client verbs %v", name, clientVerbs)
			}
			if slices.Contains(envFlagCommands, name) {
				t.Errorf("%s is listed as reading every flag from EDL_*", name)
			}
		case strings.Contains(help, "each also read from EDL_"):
			if !slices.Contains(envFlagCommands, name) {
				t.Errorf("%s reads every flag from EDL_* but is not among the usage's %v", name, envFlagCommands)
			}
		default:
			t.Errorf("%s --help says neither how its flags read the environment:\n%s", name, help)
		}
	}
}
