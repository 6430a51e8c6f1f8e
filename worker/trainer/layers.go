package trainer

// Block sizes of the forward product: a fwdKB x fwdJB tile of a weight
// matrix (256 KiB of float32) stays in L2 while every sample of the batch
// passes over it.
const (
	fwdKB = 256
	fwdJB = 256
)

// forward computes every layer's output for n samples of x into ws.acts.
func (m *Model) forward(x []float32, n int) {
	ws := &m.ws
	in := x[:n*m.dims[0]]
	for l := 0; l+1 < len(m.dims); l++ {
		din, dout := m.dims[l], m.dims[l+1]
		// The inputs of hidden layers are ReLU outputs, about half zero:
		// listing the non-zero ones per sample halves the work.
		for i := range n {
			row := in[i*din : (i+1)*din]
			nz := ws.nzIdx[i*din : (i+1)*din]
			c := 0
			for k, v := range row {
				if v != 0 {
					nz[c] = int32(k)
					c++
				}
			}
			ws.nzCnt[i] = int32(c)
		}
		out := ws.acts[l][:n*dout]
		ws.job = layerJob{l: l, n: n, in: in, out: out, relu: l+2 < len(m.dims)}
		m.parallel(dout, 8, ws.fwdFn)
		in = out
	}
}

// forwardCols computes output columns [c0, c1) of the layer in ws.job.
func (m *Model) forwardCols(t, c0, c1 int) {
	ws := &m.ws
	job := &ws.job
	n, din, dout := job.n, m.dims[job.l], m.dims[job.l+1]
	w, b := m.weights(job.l), m.biases(job.l)
	cur := ws.tw[t].cur[:n]
	for j0 := c0; j0 < c1; j0 += fwdJB {
		j1 := min(j0+fwdJB, c1)
		for i := range n {
			copy(job.out[i*dout+j0:i*dout+j1], b[j0:j1])
			cur[i] = 0
		}
		for k1 := fwdKB; k1-fwdKB < din; k1 += fwdKB {
			for i := range n {
				nz := ws.nzIdx[i*din : i*din+int(ws.nzCnt[i])]
				s := cur[i]
				e := s
				for int(e) < len(nz) && int(nz[e]) < k1 {
					e++
				}
				cur[i] = e
				y := job.out[i*dout+j0 : i*dout+j1]
				a := job.in[i*din : (i+1)*din]
				p := nz[s:e]
				for ; len(p) >= 4; p = p[4:] {
					k0, k1, k2, k3 := int(p[0]), int(p[1]), int(p[2]), int(p[3])
					axpy4(y,
						w[k0*dout+j0:k0*dout+j1], w[k1*dout+j0:k1*dout+j1],
						w[k2*dout+j0:k2*dout+j1], w[k3*dout+j0:k3*dout+j1],
						a[k0], a[k1], a[k2], a[k3])
				}
				for _, k := range p {
					axpy1(y, w[int(k)*dout+j0:int(k)*dout+j1], a[k])
				}
			}
		}
		if job.relu {
			for i := range n {
				y := job.out[i*dout+j0 : i*dout+j1]
				for j, v := range y {
					if v < 0 {
						y[j] = 0
					}
				}
			}
		}
	}
}

// backward adds the gradient of the summed loss to grad, starting from
// dLoss/dlogits in ws.dz[0] and the activations left by forward.
func (m *Model) backward(x []float32, n int, grad []float32) {
	ws := &m.ws
	cur := 0
	for l := len(m.dims) - 2; l >= 0; l-- {
		din, dout := m.dims[l], m.dims[l+1]
		dz := ws.dz[cur][:n*dout]
		gb := grad[m.bOff[l] : m.bOff[l]+dout]
		for i := range n {
			axpy1(gb, dz[i*dout:(i+1)*dout], 1)
		}
		var in, da []float32
		if l == 0 {
			in = x[:n*din]
		} else {
			in = ws.acts[l-1][:n*din]
			da = ws.dz[1-cur][:n*din]
		}
		ws.job = layerJob{l: l, n: n, in: in, dz: dz, da: da, grad: grad}
		m.parallel(din, 1, ws.bwdFn)
		cur = 1 - cur
	}
}

// backwardRows handles input rows [k0, k1) of the layer in ws.job: row k of
// the weight gradient, sum_i in[i,k] * dz[i,:], and column k of the input
// gradient, dz[i,:] . w[k,:] where in[i,k] > 0 (the ReLU's derivative),
// sharing one pass over the samples whose input k is non-zero.
func (m *Model) backwardRows(t, k0, k1 int) {
	ws := &m.ws
	job := &ws.job
	n, din, dout := job.n, m.dims[job.l], m.dims[job.l+1]
	w := m.weights(job.l)
	gw := job.grad[m.wOff[job.l] : m.wOff[job.l]+din*dout]
	dz := job.dz
	tw := &ws.tw[t]
	for k := k0; k < k1; k++ {
		idx, val := tw.idx[:0], tw.val[:0]
		for i := range n {
			if v := job.in[i*din+k]; v != 0 {
				idx = append(idx, int32(i))
				val = append(val, v)
			}
		}
		g := gw[k*dout : (k+1)*dout]
		p, v := idx, val
		for ; len(p) >= 4; p, v = p[4:], v[4:] {
			i0, i1, i2, i3 := int(p[0]), int(p[1]), int(p[2]), int(p[3])
			axpy4(g, dz[i0*dout:(i0+1)*dout], dz[i1*dout:(i1+1)*dout],
				dz[i2*dout:(i2+1)*dout], dz[i3*dout:(i3+1)*dout], v[0], v[1], v[2], v[3])
		}
		for j, i := range p {
			axpy1(g, dz[int(i)*dout:(int(i)+1)*dout], v[j])
		}
		if job.da == nil {
			continue
		}
		for i := range n {
			job.da[i*din+k] = 0
		}
		wk := w[k*dout : (k+1)*dout]
		for p = idx; len(p) >= 4; p = p[4:] {
			i0, i1, i2, i3 := int(p[0]), int(p[1]), int(p[2]), int(p[3])
			s0, s1, s2, s3 := dot4(wk, dz[i0*dout:(i0+1)*dout], dz[i1*dout:(i1+1)*dout],
				dz[i2*dout:(i2+1)*dout], dz[i3*dout:(i3+1)*dout])
			job.da[i0*din+k], job.da[i1*din+k], job.da[i2*din+k], job.da[i3*din+k] = s0, s1, s2, s3
		}
		for _, i := range p {
			job.da[int(i)*din+k] = dot1(wk, dz[int(i)*dout:(int(i)+1)*dout])
		}
	}
}
