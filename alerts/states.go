package alerts

import "time"

// holds moves an instance whose condition is true at this evaluation: towards firing once
// it has held for the rule's 'for', and re-sent while it fires.
func (e *Evaluator) holds(pass *Pass, r *Rule, in *Instance, now time.Time) {
	switch in.State {
	case StateInactive:
		if r.For == 0 {
			e.move(pass, in, StateFiring, now)
		} else {
			e.move(pass, in, StatePending, now)
		}
	case StatePending:
		if now.Sub(in.ActiveAt) >= r.For {
			e.move(pass, in, StateFiring, now)
		} else {
			pass.Upserts = append(pass.Upserts, *in)
		}
	case StateRecovering:
		e.move(pass, in, StateFiring, now)
	case StateFiring:
		e.notifyResend(pass, in, now)
		pass.Upserts = append(pass.Upserts, *in)
	}
}

// stoppedHolding moves the instances whose condition was not true at this evaluation (those
// not in seen): a firing one keeps firing for the rule's keep_firing_for, so one quiet
// evaluation does not resolve it.
func (e *Evaluator) stoppedHolding(pass *Pass, r *Rule, ins map[string]*Instance, seen map[string]bool, now time.Time) {
	for key, in := range ins {
		if seen[key] {
			continue
		}
		switch in.State {
		case StatePending:
			e.move(pass, in, StateInactive, now)
		case StateFiring:
			if r.KeepFiringFor > 0 && now.Sub(in.LastTrueAt) < r.KeepFiringFor {
				e.move(pass, in, StateRecovering, now)
			} else {
				e.move(pass, in, StateInactive, now)
			}
		case StateRecovering:
			if now.Sub(in.LastTrueAt) >= r.KeepFiringFor {
				e.move(pass, in, StateInactive, now)
			} else {
				e.notifyResend(pass, in, now)
				pass.Upserts = append(pass.Upserts, *in)
			}
		}
	}
}

// move changes in's state, records it in the history and tells the receivers what they
// need to hear.
func (e *Evaluator) move(pass *Pass, in *Instance, to State, now time.Time) {
	from := in.State
	pass.History = append(pass.History, Transition{At: now, RuleKey: in.RuleKey, Alert: in.Alert, InstanceKey: in.Key,
		Labels: in.Labels, From: from, To: to, Value: in.Value})
	in.State, in.Since = to, now
	switch {
	case to == StateFiring && from == StateRecovering:
		// Still firing as far as receivers know: Alertmanager hears it again, webhooks
		// heard nothing of the recovery.
		e.notify(pass, in, now, func(r ReceiverInfo) (bool, bool) { return r.EveryEvaluation, true })
	case to == StateFiring:
		in.FiredAt = now
		e.notify(pass, in, now, func(ReceiverInfo) (bool, bool) { return true, false })
	case to == StateRecovering:
		e.notify(pass, in, now, func(r ReceiverInfo) (bool, bool) { return r.EveryEvaluation, true })
	case to == StateInactive && from.Active():
		e.notify(pass, in, now, func(ReceiverInfo) (bool, bool) { return true, false })
	}
	if to == StateInactive {
		pass.Deletes = append(pass.Deletes, in.Key)
	} else {
		pass.Upserts = append(pass.Upserts, *in)
	}
}

func (e *Evaluator) notifyResend(pass *Pass, in *Instance, now time.Time) {
	e.notify(pass, in, now, func(r ReceiverInfo) (bool, bool) { return r.EveryEvaluation, true })
}

// resendAfter is how far ahead a firing alert's endsAt is set: Prometheus uses four
// evaluation intervals (at least four resend delays of 1m), so Alertmanager resolves an
// alert on its own if the evaluator dies, but not because one delivery was late.
func (e *Evaluator) resendAfter() time.Duration {
	return 4 * max(e.tick(), time.Minute)
}

func (e *Evaluator) notify(pass *Pass, in *Instance, now time.Time, want func(ReceiverInfo) (send, resend bool)) {
	n := e.notice(in, now)
	for _, r := range e.Receivers {
		if send, resend := want(r); send {
			pass.Notifications = append(pass.Notifications, Notification{Receiver: r.Name, InstanceKey: in.Key, Resend: resend, Notice: n})
		}
	}
}

func (e *Evaluator) notice(in *Instance, now time.Time) Notice {
	n := Notice{Status: "firing", Labels: in.Labels, Annotations: in.Annotations, StartsAt: in.FiredAt,
		EndsAt: now.Add(e.resendAfter()), GeneratorURL: e.ExternalURL + "/alerts", Fingerprint: in.Key}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	if in.State == StateInactive {
		n.Status, n.EndsAt = "resolved", now
	}
	if n.StartsAt.IsZero() {
		n.StartsAt = in.ActiveAt
	}
	return n
}
