package nomad

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func parse(t *testing.T, name string) *hclsyntax.Body {
	t.Helper()
	p := hclparse.NewParser()
	f, diags := p.ParseHCLFile(name)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", name, diags.Error())
	}
	return f.Body.(*hclsyntax.Body)
}

// blocks returns the nested blocks of a type (labels optional).
func blocks(b *hclsyntax.Body, typ string, labels ...string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, bl := range b.Blocks {
		if bl.Type == typ && (len(labels) == 0 || slices.Equal(bl.Labels, labels)) {
			out = append(out, bl)
		}
	}
	return out
}

func one(t *testing.T, b *hclsyntax.Body, typ string, labels ...string) *hclsyntax.Body {
	t.Helper()
	bs := blocks(b, typ, labels...)
	if len(bs) != 1 {
		t.Fatalf("want one %s %v block, found %d", typ, labels, len(bs))
	}
	return bs[0].Body
}

// literal evaluates an attribute that must not depend on variables.
func literal(t *testing.T, b *hclsyntax.Body, name string) cty.Value {
	t.Helper()
	a, ok := b.Attributes[name]
	if !ok {
		t.Fatalf("attribute %s missing", name)
	}
	v, diags := a.Expr.Value(&hcl.EvalContext{})
	if diags.HasErrors() {
		t.Fatalf("attribute %s: %s", name, diags.Error())
	}
	return v
}

func str(t *testing.T, b *hclsyntax.Body, name string) string {
	t.Helper()
	return literal(t, b, name).AsString()
}

func strs(t *testing.T, b *hclsyntax.Body, name string) []string {
	t.Helper()
	var out []string
	for _, v := range literal(t, b, name).AsValueSlice() {
		out = append(out, v.AsString())
	}
	return out
}

func TestEveryFileParses(t *testing.T) {
	files, err := filepath.Glob("*.hcl")
	if err != nil || len(files) < 3 {
		t.Fatalf("hcl files %v %v", files, err)
	}
	for _, f := range files {
		parse(t, f)
	}
}

func TestEdlServeIsAReplicatedServiceBehindDiscovery(t *testing.T) {
	job := one(t, parse(t, "edl.nomad.hcl"), "job", "edl")
	if got := str(t, job, "type"); got != "service" {
		t.Errorf("type %q, want service", got)
	}
	g := one(t, job, "group", "api")
	if n, _ := literal(t, g, "count").AsBigFloat().Int64(); n < 2 {
		t.Errorf("count %d, want 2 or more replicas", n)
	}
	c := one(t, g, "constraint")
	if str(t, c, "operator") != "distinct_hosts" {
		t.Errorf("replicas not spread over hosts")
	}
	svc := one(t, g, "service")
	if str(t, svc, "provider") != "nomad" || str(t, svc, "name") != "edl-api" {
		t.Errorf("service %q provider %q", str(t, svc, "name"), str(t, svc, "provider"))
	}
	if str(t, one(t, svc, "check"), "path") != "/readyz" {
		t.Errorf("check path is not /readyz")
	}
	task := one(t, g, "task", "serve")
	env := one(t, task, "env")
	for _, k := range []string{"EDL_NOMAD_CA_CERT", "EDL_NOMAD_CLIENT_CERT", "EDL_NOMAD_CLIENT_KEY", "EDL_NOMAD_TLS_SERVER_NAME", "EDL_NOMAD_ADDR"} {
		if _, ok := env.Attributes[k]; !ok {
			t.Errorf("env %s missing (TLS to the Nomad API)", k)
		}
	}
	if _, ok := env.Attributes["EDL_NOMAD_TOKEN"]; ok {
		t.Error("the Nomad token is in the job spec; it belongs in a Nomad Variable")
	}
	var rendered []string
	for _, tb := range blocks(task, "template") {
		rendered = append(rendered, str(t, tb.Body, "data"))
	}
	all := strings.Join(rendered, "\n")
	for _, want := range []string{`nomadService "edl-redis"`, "EDL_NOMAD_TOKEN=", "EDL_REDIS=redis://"} {
		if !strings.Contains(all, want) {
			t.Errorf("templates lack %q", want)
		}
	}
}

func TestRedisKeepsItsDataOnAHostVolumeWithAOF(t *testing.T) {
	job := one(t, parse(t, "redis.nomad.hcl"), "job", "edl-redis")
	g := one(t, job, "group", "redis")
	vol := one(t, g, "volume", "data")
	if str(t, vol, "type") != "host" || str(t, vol, "source") != "edl-redis" {
		t.Errorf("volume %q %q, want a host volume edl-redis", str(t, vol, "type"), str(t, vol, "source"))
	}
	task := one(t, g, "task", "redis")
	if d := str(t, one(t, task, "volume_mount"), "destination"); d != "/data" {
		t.Errorf("volume mounted at %q", d)
	}
	conf := str(t, one(t, task, "template"), "data")
	for _, want := range []string{"dir /data", "appendonly yes", "appendfsync everysec", "requirepass"} {
		if !strings.Contains(conf, want) {
			t.Errorf("redis.conf lacks %q", want)
		}
	}
	if str(t, one(t, g, "service"), "provider") != "nomad" {
		t.Error("redis not registered with Nomad service discovery")
	}
}

// TestPolicyIsLeastPrivilege: write capabilities only in the training
// namespace, read-job elsewhere, node read, nothing else.
func TestPolicyIsLeastPrivilege(t *testing.T) {
	b := parse(t, "edl-policy.hcl")
	ml := one(t, b, "namespace", "ml")
	want := []string{"alloc-lifecycle", "list-jobs", "read-job", "read-logs", "scale-job", "submit-job"}
	got := strs(t, ml, "capabilities")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("ml capabilities %v, want %v", got, want)
	}
	if got := strs(t, one(t, b, "namespace", "*"), "capabilities"); !slices.Equal(got, []string{"read-job"}) {
		t.Errorf("* capabilities %v, want [read-job]", got)
	}
	if p := str(t, one(t, b, "node"), "policy"); p != "read" {
		t.Errorf("node policy %q, want read", p)
	}
	var types []string
	for _, bl := range b.Blocks {
		types = append(types, bl.Type)
	}
	for _, forbidden := range []string{"agent", "operator", "quota", "plugin", "host_volume"} {
		if slices.Contains(types, forbidden) {
			t.Errorf("policy grants %s", forbidden)
		}
	}
	for _, ns := range blocks(b, "namespace") {
		if _, ok := ns.Body.Attributes["policy"]; ok {
			t.Errorf("namespace %v uses a coarse policy; list capabilities", ns.Labels)
		}
	}
	if _, err := os.Stat("edl-policy.hcl"); err != nil {
		t.Fatal(err)
	}
}
