package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/recon"
)

// The lease of the test's replicas, and the reconciler's interval: a dead holder's role is
// taken over at most lease + interval after its last renewal.
const (
	testRoleLease     = 3 * time.Second
	testReconInterval = time.Second
)

// Three 'settle serve' processes on one database, configured by nothing but DATABASE_URL
// (the lease is shortened for the test): the reconciler and the alert evaluator act on one
// replica at a time, and when the replica holding one is killed with SIGKILL, another takes
// it over once its lease has run out, within the lease and one interval, and does its work.
func TestReplicasTakeOverRolesAfterSIGKILL(t *testing.T) {
	testtool.Heavy(t, "replicas killed with SIGKILL")
	t.Parallel()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	// Every reconciliation lists slowly, so a replica is killed in the middle of one.
	fk.AddFault(fake.Fault{Method: "GET", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 1500 * time.Millisecond})
	env := []string{"DATABASE_URL=" + url, "STRIPE_API_KEY=sk_test_replicas", "STRIPE_API_BASE=" + base,
		"SETTLE_ROLE_LEASE=" + testRoleLease.String(), "SETTLE_RECONCILE_INTERVAL=" + testReconInterval.String(), "SETTLE_WORKERS=0"}
	var rs []*replica
	for i := 1; i <= 3; i++ {
		rs = append(rs, startReplica(t, fmt.Sprintf("replica%d", i), nil, env...))
	}
	waitHealthy(t, rs...)

	// The reconciler: one replica runs, holding the lease for its run.
	var held leaseRow
	waitFor(t, 15*time.Second, "no replica holds the reconciler's lease", func() bool {
		held = readLease(t, db, recon.LeaseName("stripe"))
		return held.until != nil
	})
	victim := holderOf(rs, held.owner)
	if victim == nil {
		t.Fatalf("the reconciler's lease is held by %q, no replica of the test", held.owner)
	}
	killed := time.Now()
	victim.kill(t)
	var now leaseRow
	took := waitFor(t, 15*time.Second, "no live replica took the reconciler's lease over after the kill", func() bool {
		now = readLease(t, db, recon.LeaseName("stripe"))
		r := holderOf(rs, now.owner)
		return now.owner != held.owner && r != nil && r.alive()
	})
	// The dead holder renewed at most a third of the lease before it died: nobody may start
	// before the rest of it ran out, and someone must by the lease and one interval after.
	if took < testRoleLease*2/3-200*time.Millisecond || took > testRoleLease+testReconInterval+3*time.Second {
		t.Errorf("the reconciler was taken over %s after its holder was killed; want after its lease ran out, within %s",
			took, testRoleLease+testReconInterval)
	}
	waitFor(t, 15*time.Second, "the replica that took the reconciler over did not finish a run", func() bool {
		var lastRun *time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT max(last_run_at) FROM recon_runs WHERE name = $1`, recon.LeaseName("stripe")).Scan(&lastRun); err != nil {
			t.Fatal(err)
		}
		return lastRun != nil && lastRun.After(killed)
	})
	t.Logf("reconciler: %s killed, %s took over after %s", victim.name, now.owner, took)

	alertTakeover(t, db, rs, killed)
}

// alertTakeover kills the replica that evaluates alerts (unless it is the one killed at
// killedBefore) and checks another takes the evaluator's lease over within it and evaluates
// the rules.
func alertTakeover(t *testing.T, db *pg.DB, rs []*replica, killedBefore time.Time) {
	t.Helper()
	var held leaseRow
	waitFor(t, 15*time.Second, "no replica holds the alert evaluator's lease", func() bool {
		held = readLease(t, db, alertsRole)
		return held.owner != ""
	})
	victim := holderOf(rs, held.owner)
	if victim == nil {
		t.Fatalf("the alert evaluator's lease is held by %q, no replica of the test", held.owner)
	}
	killed := killedBefore
	if victim.alive() {
		killed = time.Now()
		victim.kill(t)
	}
	var now leaseRow
	waitFor(t, 15*time.Second, "no live replica evaluated the alert rules after the kill", func() bool {
		now = readLease(t, db, alertsRole)
		r := holderOf(rs, now.owner)
		if r == nil || !r.alive() {
			return false
		}
		var last *time.Time
		if err := db.Pool.QueryRow(context.Background(), `SELECT max(evaluated_at) FROM alert_rule_status`).Scan(&last); err != nil {
			t.Fatal(err)
		}
		return last != nil && last.After(killed)
	})
	took := time.Since(killed)
	if took > testRoleLease+testRoleLease/3+3*time.Second {
		t.Errorf("the alert evaluator was taken over %s after its holder was killed; want within %s", took, testRoleLease+testRoleLease/3)
	}
	t.Logf("alert evaluator: %s killed, %s took over after %s", victim.name, now.owner, took)
}
