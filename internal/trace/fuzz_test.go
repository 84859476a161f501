package trace_test

import (
	"encoding/binary"
	"reflect"
	"testing"

	. "github.com/cfsprobe/cfsprobe/internal/trace"
)

// decodeSamples turns fuzz bytes into monotone counters the kernel could
// show, 6 bytes a reading: time, usage, nr_periods (consistent with time
// or not), nr_throttled (never gaining on nr_periods), stall and burst
// time. Values stay small, so a run has at most a few thousand periods.
func decodeSamples(data []byte, periodNs int64) []CounterSample {
	var s []CounterSample
	var c CounterSample
	for len(data) >= 6 && len(s) < 256 {
		b := data[:6]
		data = data[6:]
		if len(s) > 0 {
			dt := int64(binary.BigEndian.Uint16(b[0:2])) % (3*periodNs + 1)
			c.T += dt
			c.UsageNs += int64(b[2]) * max(dt, 1) / 128
			switch b[3] >> 6 {
			case 0:
				c.NrPeriods += dt / periodNs
			case 1:
				c.NrPeriods += int64(b[3] & 3)
			}
			if room := c.NrPeriods - (c.NrThrottled - s[0].NrThrottled) - s[0].NrPeriods; room > 0 {
				c.NrThrottled += int64(b[4]&0x0f) % (room + 1)
			}
			c.ThrottledNs += int64(b[4]>>4) * periodNs / 16
			if b[5]&1 == 1 {
				c.NrBursts++
				c.BurstNs += int64(b[5] >> 1)
			}
		} else {
			c = CounterSample{T: int64(b[0]), UsageNs: int64(b[2]), NrPeriods: int64(b[3] & 7)}
			c.NrThrottled = min(int64(b[4]&7), c.NrPeriods)
		}
		s = append(s, c)
	}
	return s
}

// encodeSamples is decodeSamples' inverse for the seed corpus.
func encodeSample(dt uint16, usage, periods, thr, burst byte) []byte {
	var b [6]byte
	binary.BigEndian.PutUint16(b[0:2], dt)
	b[2], b[3], b[4], b[5] = usage, periods, thr, burst
	return b[:]
}

func FuzzBuildTimeline(f *testing.F) {
	// A regular grid: 10 samples a period, a throttled period in three.
	var grid []byte
	for i := 0; i < 60; i++ {
		thr := byte(0)
		if i%30 == 9 {
			thr = 1
		}
		grid = append(grid, encodeSample(100, 128, 0, thr, 0)...)
	}
	f.Add(grid, uint16(999), true)
	f.Add(grid, uint16(999), false)
	// Sparse samples with several boundaries each, bursts.
	var sparse []byte
	for i := 0; i < 10; i++ {
		sparse = append(sparse, encodeSample(250, 200, 0x40|3, 0x32, 0x0b)...)
	}
	f.Add(sparse, uint16(99), true)
	// Readings in the same instant, throttles torn from their boundary.
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 0x41, 0, 0, 0, 10, 9, 0x40, 1, 0, 0, 10, 9, 0x40, 0, 1}, uint16(9), true)
	f.Add([]byte{}, uint16(0), true)
	f.Fuzz(func(t *testing.T, data []byte, period uint16, kernel bool) {
		periodNs := int64(period%2000) + 1
		s := decodeSamples(data, periodNs)
		ps := BuildTimeline(s, kernelConfig(periodNs, kernel))
		checkInvariants(t, s, periodNs, kernel, ps)
		if again := BuildTimeline(s, kernelConfig(periodNs, kernel)); !reflect.DeepEqual(ps, again) {
			t.Fatal("BuildTimeline is not deterministic")
		}
	})
}
