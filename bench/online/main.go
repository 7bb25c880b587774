// Command online measures drainpipe's online batching with the MLP
// 64-256-256-10 on the CPU device, all in one run so the figures compare:
//
//   - offline: the Predictor over the same rows in large records, batch 256
//     (the reference rate);
//
//   - saturation: closed-loop callers, each sending 1-row requests to a
//     Batcher and waiting for the answer: rows/s against offline;
//
//   - open loop: 1-row requests arriving at random (Poisson) at 10%, 50%
//     and 90% of the saturation rate, for several maximum delays, through
//     the Batcher and through online.Stream: latency p50/p99 (from each
//     request's scheduled arrival, so a slow server cannot hide its queue),
//     padding waste, and the mean device time of a batch.
//
//     go run ./bench/online                       # the table
//     go run -tags openblas ./bench/online        # the CPU device on OpenBLAS
//     go run ./bench/online --duration 500ms      # a quick run
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

const width = 64

// figures are what a table row reports of a run.
type figures struct {
	rows, batches, padded int64
	device                time.Duration
	p50, p99              time.Duration
}

func fromBatcher(s online.Stats) figures {
	return figures{rows: s.Rows, batches: s.Batches, padded: s.PaddedRows, device: s.DeviceTime}
}

type bench struct {
	model    device.Model
	schema   *arrow.Schema
	pool     []arrow.RecordBatch // 1-row requests
	batch    int
	sizes    []int
	sessions int
	eager    bool
	callers  int
	duration time.Duration
	out      *tabwriter.Writer
}

func main() {
	batch := flag.Int("batch", 256, "the largest batch size")
	sizesFlag := flag.String("sizes", "16,32,64,128,256", "allowed batch sizes, ascending, ending at --batch")
	delaysFlag := flag.String("delays", "1ms,5ms,20ms", "maximum queue delays for the open-loop runs")
	loadsFlag := flag.String("loads", "0.1,0.5,0.9", "open-loop arrival rates as fractions of the saturation rate (empty: none)")
	callers := flag.Int("callers", 64, "closed-loop callers for the saturation run")
	sessions := flag.Int("sessions", 1, "session groups (WithGroups)")
	eager := flag.Bool("eager", true, "WithEager: free sessions take full allowed sizes at once")
	duration := flag.Duration("duration", 2*time.Second, "length of each run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}

	sizes, err := cliflag.Ints(*sizesFlag)
	check(err)
	delays, err := cliflag.Durations(*delaysFlag)
	check(err)
	loads, err := cliflag.Floats(*loadsFlag)
	check(err)
	model, err := cpu.NewMLP([]int{width, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	check(err)
	b := &bench{model: model, schema: dataset.TensorSchema(width), batch: *batch, sizes: sizes,
		sessions: *sessions, eager: *eager, callers: *callers, duration: *duration,
		out: tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)}
	big := one(dataset.UniformTensors(memory.DefaultAllocator, 4096, width, 4096, 7))
	defer big.Release()
	for i := range 4096 {
		b.pool = append(b.pool, big.NewSlice(int64(i), int64(i+1)))
	}
	fmt.Printf("MLP 64-256-256-10 (%s), batch %d, allowed sizes %v, %d session group(s), GOMAXPROCS %d\n\n",
		cpu.BLASName, b.batch, sizes, b.sessions, runtime.GOMAXPROCS(0))

	offline := b.offline()
	fmt.Fprintln(b.out, "run\tdelay\tload\toffered rows/s\trows/s\t× offline\tp50\tp99\tpadding\tmean batch\tdevice/batch\t")
	b.row("offline", 0, 0, 0, offline, offline, figures{})
	sat, st := b.saturation(5 * time.Millisecond)
	b.row(fmt.Sprintf("saturation, %d callers", b.callers), 5*time.Millisecond, 0, 0, sat, offline, st)
	sat0, st0 := b.saturation(0)
	b.row(fmt.Sprintf("saturation, %d callers", b.callers), 0, 0, 0, sat0, offline, st0)
	// The Batcher's own cost: against the Predictor offline at the mean
	// batch the Batcher formed, the device's work is the same.
	mean := int(math.Round(float64(st0.rows+st0.padded) / float64(max(st0.batches, 1))))
	atMean := b.offlineAt(max(mean, 1))
	b.row(fmt.Sprintf("offline, batch %d", mean), 0, 0, 0, atMean, offline, figures{})
	defer fmt.Printf("\nbatcher goal: saturation (no delay) ÷ offline at its mean batch of %d = %.3f (goal ≥ 0.80)\n", mean, sat0/atMean)
	capacity := max(sat, sat0)
	for _, d := range delays {
		for _, load := range loads {
			rate := load * capacity
			got, st := b.openLoop(d, rate, false)
			b.row("batcher", d, load, rate, got, offline, st)
			got, st = b.openLoop(d, rate, true)
			b.row("stream", d, load, rate, got, offline, st)
		}
	}
	b.out.Flush()
}

func (b *bench) predictor(opts ...predict.Option) *predict.Predictor {
	p, err := predict.New(b.model, append([]predict.Option{predict.WithBatchSizes(b.sizes...), predict.WithGroups(b.sessions)}, opts...)...)
	check(err)
	return p
}

// batching is the online options of a run with the given delay (0: none).
func (b *bench) batching(delay time.Duration) online.Options {
	return online.Options{MaxDelay: cmp.Or(delay, online.NoDelay), NoEager: !b.eager, QueueRows: 1 << 20}
}

// offline runs the Predictor over 100 records of 4096 rows.
func (b *bench) offline() float64 { return b.offlineAt(b.batch) }

// offlineAt runs the Predictor over 100 records of 4096 rows in batches
// of size rows.
func (b *bench) offlineAt(size int) float64 {
	big := one(dataset.UniformTensors(memory.DefaultAllocator, 4096, width, 4096, 7))
	defer big.Release()
	p, err := predict.New(b.model, predict.WithBatchSize(size), predict.WithGroups(b.sessions))
	check(err)
	began := time.Now()
	rows := 0
	for rec, err := range p.All(context.Background(), dataset.FromRecords(b.schema, slices.Repeat([]arrow.RecordBatch{big}, 100)...)) {
		check(err)
		rows += int(rec.NumRows())
	}
	return float64(rows) / time.Since(began).Seconds()
}

// saturation runs closed-loop callers for the duration.
func (b *bench) saturation(delay time.Duration) (float64, figures) {
	bt, err := online.NewBatcher(context.Background(), b.predictor(), b.schema, b.batching(delay))
	check(err)
	var rows atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), b.duration)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	for c := range b.callers {
		wg.Go(func() {
			for i := c; ctx.Err() == nil; i += b.callers {
				out, err := bt.Predict(context.Background(), b.pool[i%len(b.pool)])
				check(err)
				out.Release()
				rows.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	check(bt.Close(context.Background()))
	return float64(rows.Load()) / elapsed.Seconds(), fromBatcher(bt.Stats())
}

// openLoop sends 1-row requests at Poisson arrivals of the given rate, each
// in its own goroutine (Batcher) or on one channel (Stream), and measures
// latency from each request's scheduled arrival.
func (b *bench) openLoop(delay time.Duration, rate float64, stream bool) (float64, figures) {
	n := int(rate * b.duration.Seconds())
	arrivals := make([]time.Duration, n)
	rng := rand.New(rand.NewPCG(9, uint64(rate)))
	t := time.Duration(0)
	for i := range arrivals {
		t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		arrivals[i] = t
	}
	latency := make([]time.Duration, n)
	var st figures
	began := time.Now()
	// wait sleeps until arrival i is due.
	wait := func(i int) {
		if d := arrivals[i] - time.Since(began); d > 100*time.Microsecond {
			time.Sleep(d)
		}
	}
	if stream {
		p := b.predictor(predict.WithStats(func(s predict.Stats) {
			st = figures{rows: s.Rows, batches: s.Batches, padded: s.PaddedRows, device: s.DeviceTime}
		}))
		in := make(chan arrow.RecordBatch, 1024)
		go func() {
			defer close(in)
			for i := range n {
				wait(i)
				rec := b.pool[i%len(b.pool)]
				rec.Retain() // the stream takes this reference
				in <- rec
			}
		}()
		i := 0
		for r := range online.Stream(context.Background(), p, b.schema, in, b.batching(delay)) {
			check(r.Err)
			latency[i] = time.Since(began) - arrivals[i]
			r.Record.Release()
			i++
		}
	} else {
		bt, err := online.NewBatcher(context.Background(), b.predictor(), b.schema, b.batching(delay))
		check(err)
		var wg sync.WaitGroup
		for i := range n {
			wait(i)
			wg.Go(func() {
				out, err := bt.Predict(context.Background(), b.pool[i%len(b.pool)])
				check(err)
				out.Release()
				latency[i] = time.Since(began) - arrivals[i]
			})
		}
		wg.Wait()
		check(bt.Close(context.Background()))
		st = fromBatcher(bt.Stats())
	}
	elapsed := time.Since(began)
	slices.Sort(latency)
	st.p50, st.p99 = latency[n/2], latency[n*99/100]
	return float64(n) / elapsed.Seconds(), st
}

func (b *bench) row(run string, delay time.Duration, load, offered, rate, offline float64, f figures) {
	dash := func(ok bool, s string) string {
		if !ok {
			return "-"
		}
		return s
	}
	mean, perBatch, padding := "-", "-", "-"
	if f.batches > 0 {
		mean = fmt.Sprintf("%.1f", float64(f.rows+f.padded)/float64(f.batches))
		perBatch = (f.device / time.Duration(f.batches)).Round(time.Microsecond).String()
		padding = fmt.Sprintf("%.1f%%", 100*float64(f.padded)/float64(f.rows+f.padded))
	}
	fmt.Fprintf(b.out, "%s\t%s\t%s\t%s\t%.0f\t%.3f\t%s\t%s\t%s\t%s\t%s\t\n", run,
		dash(run != "offline", delay.String()), dash(load > 0, fmt.Sprintf("%.0f%%", 100*load)),
		dash(offered > 0, fmt.Sprintf("%.0f", offered)), rate, rate/offline,
		dash(f.p50 > 0, f.p50.Round(10*time.Microsecond).String()),
		dash(f.p99 > 0, f.p99.Round(10*time.Microsecond).String()),
		padding, mean, perBatch)
}

func one(ds *dataset.Dataset) arrow.RecordBatch {
	for rec, err := range ds.Records() {
		check(err)
		rec.Retain()
		return rec
	}
	panic("empty dataset")
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
