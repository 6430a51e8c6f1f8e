package local

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU is one device found through NVML.
type GPU struct {
	Index     int
	UUID      string
	Model     string
	MemoryMiB int
}

// ErrNoNVML means the NVIDIA management library is not on this machine.
var ErrNoNVML = errors.New("no NVML: libnvidia-ml not found")

// DiscoverGPUs lists this machine's GPUs through NVML. On a machine without
// the NVIDIA driver it returns ErrNoNVML, which callers treat as "CPU only".
func DiscoverGPUs() ([]GPU, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, ErrNoNVML
		}
		return nil, fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %s", nvml.ErrorString(ret))
	}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %s", i, nvml.ErrorString(ret))
		}
		g := GPU{Index: i}
		if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d uuid: %s", i, nvml.ErrorString(ret))
		}
		if g.Model, ret = d.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d name: %s", i, nvml.ErrorString(ret))
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryMiB = int(mem.Total >> 20)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}
