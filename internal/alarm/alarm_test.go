package alarm

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// The alarm goes off no sooner than it was set to, and at once when it
// is set to now from another goroutine while it is waited on.
func TestAlarm(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	start := time.Now()
	a.Set(30 * ms)
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*ms {
		t.Errorf("the alarm set to 30ms went off after %v", el)
	}
	a.Set(time.Hour)
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	time.Sleep(20 * ms)
	a.Set(0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the alarm set again to now did not go off")
	}
}

// A Wait under way returns when the alarm is closed.
func TestAlarmClose(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a.Set(time.Hour)
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	time.Sleep(20 * ms)
	a.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Wait on a closed alarm returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return when the alarm was closed")
	}
}
