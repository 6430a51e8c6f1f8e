package trainer

import "sync"

// workspace holds every buffer a step needs, sized for the largest batch seen
// so far, so that a step in steady state allocates nothing.
type workspace struct {
	capN  int
	acts  [][]float32  // acts[l]: output of layer l (after ReLU for hidden layers)
	dz    [2][]float32 // ping-pong: gradient at a layer's output, then its input
	nzIdx []int32      // per sample, the indices of its non-zero inputs to a layer
	nzCnt []int32      // per sample, how many of nzIdx are in use
	tw    []threadWork // per goroutine scratch
	job   layerJob     // the layer being computed, read by fwdFn and bwdFn
	fwdFn func(t, lo, hi int)
	bwdFn func(t, lo, hi int)
}

type threadWork struct {
	cur []int32   // per sample, how far forwardCols got in its nzIdx
	idx []int32   // samples whose input k is non-zero
	val []float32 // their input values
}

// layerJob describes one layer's product for the goroutines that share it.
type layerJob struct {
	l, n int
	in   []float32 // layer input, n x dims[l]
	out  []float32 // forward: layer output, n x dims[l+1]
	relu bool
	dz   []float32 // backward: gradient at the output, n x dims[l+1]
	da   []float32 // backward: gradient at the input, n x dims[l]; nil for layer 0
	grad []float32
}

func (ws *workspace) init(m *Model) {
	ws.fwdFn = m.forwardCols
	ws.bwdFn = m.backwardRows
	ws.ensureThreads(m, m.threads)
}

func (ws *workspace) ensureBatch(m *Model, n int) {
	if n <= ws.capN {
		return
	}
	ws.capN = n
	layers := len(m.dims) - 1
	ws.acts = make([][]float32, layers)
	maxOut, maxIn := 0, 0
	for l := range layers {
		ws.acts[l] = make([]float32, n*m.dims[l+1])
		maxOut = max(maxOut, m.dims[l+1])
		maxIn = max(maxIn, m.dims[l])
	}
	ws.dz[0] = make([]float32, n*maxOut)
	ws.dz[1] = make([]float32, n*maxOut)
	ws.nzIdx = make([]int32, n*maxIn)
	ws.nzCnt = make([]int32, n)
	ws.tw = nil
	ws.ensureThreads(m, m.threads)
}

func (ws *workspace) ensureThreads(m *Model, t int) {
	for len(ws.tw) < t {
		ws.tw = append(ws.tw, threadWork{
			cur: make([]int32, ws.capN),
			idx: make([]int32, 0, ws.capN),
			val: make([]float32, 0, ws.capN),
		})
	}
}

// parallel splits [0, total) into one contiguous range per goroutine, each
// starting at a multiple of align, and runs fn on them. With one thread it
// calls fn directly and allocates nothing.
func (m *Model) parallel(total, align int, fn func(t, lo, hi int)) {
	t := min(m.threads, max(total/max(align, 16), 1))
	if t <= 1 {
		fn(0, 0, total)
		return
	}
	bound := func(i int) int {
		if i == t {
			return total
		}
		return total * i / t / align * align
	}
	var wg sync.WaitGroup
	for i := 1; i < t; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i, bound(i), bound(i+1))
		}()
	}
	fn(0, 0, bound(1))
	wg.Wait()
}
