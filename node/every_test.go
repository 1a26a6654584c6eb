package node

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// every calls f at once and again after each interval, holds no goroutine
// between calls, and its wait returns only after the call in progress when
// ctx ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	inCall := make(chan struct{})
	release := make(chan struct{})
	wait := every(ctx, 20*time.Millisecond, 0, func(context.Context) {
		if calls.Add(1) == 5 {
			close(inCall)
			<-release
		}
	})
	poll.Until(t, 5*time.Second, "three calls at a 20ms interval", func() (bool, string) {
		return calls.Load() >= 3, fmt.Sprintf("%d calls", calls.Load())
	})
	<-inCall
	cancel()
	waited := make(chan struct{})
	go func() { wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a call was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-waited
	n := calls.Load()
	time.Sleep(60 * time.Millisecond)
	if calls.Load() != n {
		t.Error("f was called after ctx ended")
	}
}

// Between calls, every holds no goroutine.
func TestEveryIdleHasNoGoroutine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	before := runtime.NumGoroutine()
	called := make(chan struct{})
	wait := every(ctx, time.Hour, 0, func(context.Context) { close(called) })
	<-called
	poll.Until(t, 2*time.Second, "no goroutine while waiting for the next call", func() (bool, string) {
		extra := runtime.NumGoroutine() - before
		return extra <= 0, fmt.Sprintf("%d goroutines more than before", extra)
	})
	cancel()
	wait()
}

// wait returns as soon as ctx ends, not when the next call would have been
// due.
func TestEveryWaitDoesNotWaitOutTheInterval(t *testing.T) {
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		called := make(chan struct{})
		wait := every(ctx, time.Hour, 0, func(context.Context) {
			select {
			case <-called:
			default:
				close(called)
			}
		})
		<-called
		cancel()
		returned := make(chan struct{})
		go func() { wait(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Fatal("wait did not return 5s after ctx ended, with the next call due in an hour")
		}
	}
}

// A jittered wait stays within the jitter's share of the interval, and
// falls on both sides of it.
func TestJittered(t *testing.T) {
	const interval = time.Minute
	if got := jittered(interval, 0); got != interval {
		t.Errorf("jittered(%s, 0) = %s", interval, got)
	}
	var shorter, longer int
	for range 1000 {
		d := jittered(interval, 0.25)
		if d < 45*time.Second || d > 75*time.Second {
			t.Fatalf("jittered(%s, 0.25) = %s, want within 45s–75s", interval, d)
		}
		if d < interval {
			shorter++
		} else if d > interval {
			longer++
		}
	}
	if shorter == 0 || longer == 0 {
		t.Errorf("1,000 waits: %d shorter than the interval, %d longer; want both", shorter, longer)
	}
}
