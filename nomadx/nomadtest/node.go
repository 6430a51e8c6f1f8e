package nomadtest

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// node is one fake client with its static resources.
type node struct {
	spec        NodeSpec
	id          string
	createIndex uint64
	modifyIndex uint64
	devices     []*api.NodeDeviceResource
	drain       *drainState
	lastDrain   *api.DrainMetadata
}

func newNode(i int, spec NodeSpec, index uint64) *node {
	spec.Name = cmp.Or(spec.Name, fmt.Sprintf("node-%d", i+1))
	spec.Datacenter = cmp.Or(spec.Datacenter, "dc1")
	spec.Model = cmp.Or(spec.Model, "H200")
	spec.CPUShares = cmp.Or(spec.CPUShares, 5192)
	spec.MemoryMB = cmp.Or(spec.MemoryMB, 24105)
	if spec.Drivers == nil {
		spec.Drivers = []string{"exec", "raw_exec", "docker"}
	}
	n := &node{spec: spec, id: newID(), createIndex: index, modifyIndex: index}
	if spec.GPUs+spec.UnhealthyGPUs > 0 {
		dev := &api.NodeDeviceResource{Vendor: "nvidia", Type: "gpu", Name: spec.Model}
		for k := 0; k < spec.GPUs+spec.UnhealthyGPUs; k++ {
			id := fmt.Sprintf("gpu%d", k)
			if spec.UniqueGPUIDs {
				id = spec.Name + "-" + id
			}
			d := &api.NodeDevice{ID: id, Healthy: k < spec.GPUs}
			if !d.Healthy {
				d.HealthDescription = "unhealthy"
			}
			dev.Instances = append(dev.Instances, d)
		}
		if spec.MemoryMiB > 0 {
			mem := int64(spec.MemoryMiB)
			dev.Attributes = map[string]*api.Attribute{"memory": {IntVal: &mem, Unit: "MiB"}}
		}
		n.devices = append(n.devices, dev)
	}
	return n
}

// computedClass stands in for Nomad's hash of a node's scheduling-relevant
// fields: nodes with the same spec share it.
func (n *node) computedClass() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%s|%d|%v", n.spec.Datacenter, n.spec.GPUs, n.spec.Model, n.spec.MemoryMiB, n.spec.Drivers)
	return fmt.Sprintf("v1:%d", h.Sum64())
}

func (n *node) ready() bool { return !n.spec.Down }

func (n *node) eligible() bool { return n.ready() && !n.spec.Ineligible && !n.spec.Drain }

func (n *node) hasDriver(d string) bool {
	for _, x := range n.spec.Drivers {
		if x == d {
			return true
		}
	}
	return false
}

// usage is what non-terminal allocations hold on a node.
type usage struct {
	cpu, mem int64
	devices  map[string]bool
}

// matchesDeviceName reports whether a device group answers a request name:
// "gpu", "nvidia/gpu" or "nvidia/gpu/<model>".
func matchesDeviceName(req string, d *api.NodeDeviceResource) bool {
	parts := strings.Split(req, "/")
	switch len(parts) {
	case 1:
		return parts[0] == d.Type
	case 2:
		return parts[0] == d.Vendor && parts[1] == d.Type
	case 3:
		return parts[0] == d.Vendor && parts[1] == d.Type && parts[2] == d.Name
	}
	return false
}

// deviceValue resolves a ${device.*} target for a device group.
func deviceValue(target string, d *api.NodeDeviceResource) (string, bool) {
	t := strings.TrimSuffix(strings.TrimPrefix(target, "${"), "}")
	switch t {
	case "device.model":
		return d.Name, true
	case "device.vendor":
		return d.Vendor, true
	case "device.type":
		return d.Type, true
	}
	if name, ok := strings.CutPrefix(t, "device.attr."); ok {
		a, ok := d.Attributes[name]
		if !ok || a == nil {
			return "", false
		}
		switch {
		case a.IntVal != nil:
			return strings.TrimSpace(fmt.Sprintf("%d %s", *a.IntVal, a.Unit)), true
		case a.FloatVal != nil:
			return strings.TrimSpace(fmt.Sprintf("%g %s", *a.FloatVal, a.Unit)), true
		case a.StringVal != nil:
			return *a.StringVal, true
		case a.BoolVal != nil:
			return strconv.FormatBool(*a.BoolVal), true
		}
	}
	return "", false
}

// byteUnits converts the units Nomad accepts for device attributes.
var byteUnits = map[string]float64{
	"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// numeric parses "40960 MiB", "40 GiB" or "12"; ok is false for anything else.
func numeric(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, false
	}
	if len(f) == 2 {
		m, ok := byteUnits[f[1]]
		if !ok {
			return 0, false
		}
		v *= m
	}
	return v, true
}

// checkConstraint evaluates one device constraint; a missing attribute fails
// it, as in Nomad.
func checkConstraint(c *api.Constraint, d *api.NodeDeviceResource) bool {
	l, ok := deviceValue(c.LTarget, d)
	if !ok {
		return false
	}
	r := c.RTarget
	switch c.Operand {
	case "=", "==", "is", "":
		return l == r
	case "!=", "not":
		return l != r
	case "regexp":
		re, err := regexp.Compile(r)
		return err == nil && re.MatchString(l)
	case "<", "<=", ">", ">=":
		lv, lok := numeric(l)
		rv, rok := numeric(r)
		if !lok || !rok {
			return false
		}
		switch c.Operand {
		case "<":
			return lv < rv
		case "<=":
			return lv <= rv
		case ">":
			return lv > rv
		default:
			return lv >= rv
		}
	}
	return false
}

// Why a node cannot serve a device request.
const (
	missNone      = iota
	missFiltered  // no group matches the name and constraints with enough healthy instances
	missExhausted // a matching group has too few free instances
)

// pickDevices chooses count free healthy instances of a matching group,
// lowest IDs first. It returns nil and why when the node cannot serve the
// request.
func pickDevices(n *node, req *api.RequestedDevice, u usage) (*api.AllocatedDeviceResource, int) {
	count := uint64(1)
	if req.Count != nil {
		count = *req.Count
	}
	why := missFiltered
	for _, d := range n.devices {
		if !matchesDeviceName(req.Name, d) {
			continue
		}
		ok := true
		for _, c := range req.Constraints {
			if !checkConstraint(c, d) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var free []string
		healthy := uint64(0)
		for _, inst := range d.Instances {
			if inst.Healthy {
				healthy++
				if !u.devices[inst.ID] {
					free = append(free, inst.ID)
				}
			}
		}
		if healthy < count {
			continue
		}
		why = missExhausted
		sort.Strings(free)
		if uint64(len(free)) < count {
			continue
		}
		return &api.AllocatedDeviceResource{Vendor: d.Vendor, Type: d.Type, Name: d.Name, DeviceIDs: free[:count]}, missNone
	}
	return nil, why
}
