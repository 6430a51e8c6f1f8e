package elasticbench

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stepLine is one line of a worker's step log.
type stepLine struct {
	At    time.Time
	Step  int64
	Gen   int64
	World int
	Epoch int
	Loss  float64
}

func readSteps(path string) []stepLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []stepLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			continue
		}
		ns, _ := strconv.ParseInt(fs[0], 10, 64)
		step, _ := strconv.ParseInt(fs[1], 10, 64)
		gen, _ := strconv.ParseInt(fs[2], 10, 64)
		world, _ := strconv.Atoi(fs[3])
		epoch, _ := strconv.Atoi(fs[4])
		loss, _ := strconv.ParseFloat(fs[5], 64)
		out = append(out, stepLine{time.Unix(0, ns), step, gen, world, epoch, loss})
	}
	return out
}

// medianInterval is the median time between consecutive steps in lines.
func medianInterval(lines []stepLine) time.Duration {
	var d []time.Duration
	for i := 1; i < len(lines); i++ {
		d = append(d, lines[i].At.Sub(lines[i-1].At))
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// switchGap is the time between the last step of generation `from` or
// earlier and the first step of a later one.
func switchGap(lines []stepLine, from int64) (time.Duration, bool) {
	for i := 1; i < len(lines); i++ {
		if lines[i-1].Gen <= from && lines[i].Gen > from {
			return lines[i].At.Sub(lines[i-1].At), true
		}
	}
	return 0, false
}

// lastEpochLoss is the mean loss over the steps of the last epoch in lines.
func lastEpochLoss(lines []stepLine) float64 {
	if len(lines) == 0 {
		return 0
	}
	e := lines[len(lines)-1].Epoch
	var sum float64
	n := 0
	for _, l := range lines {
		if l.Epoch == e {
			sum += l.Loss
			n++
		}
	}
	return sum / float64(n)
}
