// Package trainer is edl's built-in workload: a multi-layer perceptron
// trained for real with SGD and momentum on a synthetic classification data
// set that any worker can regenerate from a seed.
//
// It owns the model (shape, deterministic initialisation, forward and
// backward passes with summed per-sample gradients), the optimizer, the data
// set (samples, partitions, per-epoch order) and the encoded model state used
// for checkpoints, hand-over to a joining worker and model download. It must
// not do I/O, talk to Redis, know about workers, ranks or generations, or
// read flags: the elastic worker drives it.
//
// # Model
//
// Layers widths are Inputs, Hidden..., Classes; hidden layers use ReLU, the
// last is linear and feeds softmax cross-entropy. The parameters are one flat
// float32 vector: for each layer, its weights (inputs x outputs, row-major)
// then its biases. Weights start uniform on [-sqrt(6/fan_in), sqrt(6/fan_in))
// (He), biases at zero, drawn from Seed; see rng.go for the generator.
// Gradient adds the sum over the batch of per-sample gradients so that
// workers with different shares of a global batch all-reduce and divide once;
// the sum of the gradients of any split of a batch equals the gradient of the
// batch up to float32 rounding, which is what makes an elastic run follow the
// static one. SGD.Step is PyTorch's form: v = mu*v + g; p -= lr*v.
//
// Speed: the products run over contiguous rows, skip the zero inputs that
// ReLU leaves (about half), keep a 256x256 tile of weights in cache while the
// batch passes over it, use AVX2+FMA assembly where the CPU has it (build tag
// purego forces plain Go), and allocate nothing per step once the workspace
// has grown to the largest batch. ModelConfig.Threads splits each product
// across goroutines by output rows or columns; results are bit-identical for
// every thread count.
//
// # Data set
//
// Sample i of a jobs.SyntheticDataset is a pure function of (Seed, i):
// features x_j are uniform with unit variance, two per 64-bit word of the
// splitmix64 stream started at streamKey(Seed, 1, i); the label is
// argmax_c sum_t hardtanh((x W1 + b1)_t) W2[t,c] for a teacher with
// TeacherHidden hidden units drawn from streamKey(Seed, 2, 0), computed in
// float64 with every product rounded, so labels match on every platform.
// Partition p is the contiguous range [p*S/P, (p+1)*S/P). Within a partition,
// epoch e visits the ids in the order of a keyed Feistel permutation
// (PartitionSamples), so a committed offset is all a worker needs to resume.
//
// # State format (version 1)
//
// MarshalState writes, all little-endian:
//
//	offset      size  field
//	0           4     magic "EDLM"
//	4           4     uint32 format version (1)
//	8           4     uint32 flags: bit 0 = velocity present
//	12          4     uint32 L, the number of layer widths (hidden layers + 2)
//	16          4*L   uint32 widths: inputs, hidden..., classes
//	16+4L       8     uint64 P, the number of parameters (checked against the widths)
//	24+4L       4*P   float32 parameters, in the layout above
//	24+4L+4P    4*P   float32 SGD velocity, only when flag bit 0 is set
//	end-4       4     uint32 CRC-32C (Castagnoli) of every byte before it
//
// Training counters (step, epoch, data cursor) are not part of it; the
// worker keeps them beside the state.
package trainer
