// Package throttle slows down password guessing and floods of /auth
// requests, in memory (per instance): a back-off per account and per
// client address on failed logins, and a token bucket per address on
// every /auth request.
package throttle

import (
	"math"
	"sync"
	"time"
)

// Throttle slows down password guessing and floods of /auth requests, in
// memory (per instance):
//
//   - per account: after freeFailures failed logins, each further attempt
//     waits 2^(n-freeFailures) seconds after the last failure, up to
//     maxAccountDelay; a success resets it. There is no lock-out, so an
//     attacker cannot lock a user out for longer than that delay.
//   - per client IP: the same back-off on failed logins from that address
//     (with a higher allowance: offices share addresses), and a token
//     bucket on every /auth request.
type Throttle struct {
	now func() time.Time

	mu       sync.Mutex
	accounts map[string]*failures
	ips      map[string]*failures
	buckets  map[string]*bucket
	swept    time.Time
}

type failures struct {
	n    int
	last time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

const (
	freeFailures      = 3
	freeIPFailures    = 20
	maxAccountDelay   = 15 * time.Minute
	bucketRate        = 2.0 // /auth requests per second and IP, sustained
	bucketBurst       = 30.0
	forgetAfter       = time.Hour
	sweepEvery        = 5 * time.Minute
	maxTrackedEntries = 100_000
)

// New returns a throttle on the clock now.
func New(now func() time.Time) *Throttle {
	return &Throttle{now: now, accounts: map[string]*failures{}, ips: map[string]*failures{}, buckets: map[string]*bucket{}}
}

// delay is how long after its last failure an entry must wait.
func (f *failures) delay(free int) time.Duration {
	if f == nil || f.n < free {
		return 0
	}
	exp := f.n - free
	if exp > 20 {
		exp = 20
	}
	d := time.Duration(math.Pow(2, float64(exp))) * time.Second
	return min(d, maxAccountDelay)
}

// LoginWait is how long a login for account from ip must wait (0: go
// ahead).
func (t *Throttle) LoginWait(account, ip string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	wait := time.Duration(0)
	if f := t.accounts[account]; f != nil {
		wait = max(wait, f.last.Add(f.delay(freeFailures)).Sub(now))
	}
	if f := t.ips[ip]; f != nil {
		wait = max(wait, f.last.Add(f.delay(freeIPFailures)).Sub(now))
	}
	return max(wait, 0)
}

// Failed records a failed login.
func (t *Throttle) Failed(account, ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	for m, k := range map[*map[string]*failures]string{&t.accounts: account, &t.ips: ip} {
		f := (*m)[k]
		if f == nil {
			if len(*m) >= maxTrackedEntries {
				continue
			}
			f = &failures{}
			(*m)[k] = f
		}
		f.n++
		f.last = now
	}
}

// Succeeded clears the account's failures.
func (t *Throttle) Succeeded(account string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.accounts, account)
}

// Allow takes a token from ip's bucket; when it is empty it returns how
// long until the next token.
func (t *Throttle) Allow(ip string) (bool, time.Duration) { return t.check(ip, true) }

// Ready is Allow without taking the token: whether ip's bucket holds one
// and, if not, how long until it does. A request that may turn out free
// (see Charge) asks Ready first and pays afterwards.
func (t *Throttle) Ready(ip string) (bool, time.Duration) { return t.check(ip, false) }

// check reports whether ip's bucket holds a token, taking it if take.
func (t *Throttle) check(ip string, take bool) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(ip)
	if b == nil {
		return false, time.Second
	}
	if b.tokens < 1 {
		return false, b.wait()
	}
	if take {
		b.tokens--
	}
	return true, 0
}

// Charge takes a token from ip's bucket for a request already served,
// even below empty: requests that passed Ready together all pay, and the
// debt lengthens the wait of the next.
func (t *Throttle) Charge(ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.bucket(ip); b != nil {
		b.tokens--
	}
}

// bucket is ip's bucket, refilled up to now (nil when too many addresses
// are tracked: the caller refuses). t.mu is held.
func (t *Throttle) bucket(ip string) *bucket {
	now := t.now()
	t.sweep(now)
	b := t.buckets[ip]
	if b == nil {
		if len(t.buckets) >= maxTrackedEntries {
			return nil
		}
		b = &bucket{tokens: bucketBurst, at: now}
		t.buckets[ip] = b
	}
	b.tokens = min(bucketBurst, b.tokens+now.Sub(b.at).Seconds()*bucketRate)
	b.at = now
	return b
}

// wait is how long until b holds a whole token.
func (b *bucket) wait() time.Duration {
	return time.Duration((1 - b.tokens) / bucketRate * float64(time.Second))
}

// sweep forgets entries idle for forgetAfter, so memory stays bounded.
func (t *Throttle) sweep(now time.Time) {
	if now.Sub(t.swept) < sweepEvery {
		return
	}
	t.swept = now
	for _, m := range []map[string]*failures{t.accounts, t.ips} {
		for k, f := range m {
			if now.Sub(f.last) > forgetAfter {
				delete(m, k)
			}
		}
	}
	for k, b := range t.buckets {
		if now.Sub(b.at) > forgetAfter {
			delete(t.buckets, k)
		}
	}
}
