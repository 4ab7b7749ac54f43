package kafka_test

import (
	"testing"
	"time"

	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
)

// TestSessionOptions: a member's rebalance timeout leaves it more than a
// heartbeat of its session, so a coordinator that counts the session while
// a member waits in JoinGroup never drops a live one, and its heartbeats
// come often enough to learn of a rebalance well within the session.
func TestSessionOptions(t *testing.T) {
	for _, session := range []time.Duration{6 * time.Second, 10 * time.Second, 30 * time.Second, 5 * time.Minute} {
		o := kafkaio.SessionOptions(session)
		if o.SessionTimeout != session {
			t.Errorf("session %v: SessionTimeout %v", session, o.SessionTimeout)
		}
		if o.HeartbeatInterval <= 0 || o.HeartbeatInterval > session/10 || o.HeartbeatInterval > 3*time.Second {
			t.Errorf("session %v: a heartbeat every %v, want at most a tenth of it and 3 s", session, o.HeartbeatInterval)
		}
		if o.RebalanceTimeout <= 0 || o.RebalanceTimeout+2*o.HeartbeatInterval >= session {
			t.Errorf("session %v: rebalance timeout %v with heartbeats every %v leaves the members that wait no margin before their session ends",
				session, o.RebalanceTimeout, o.HeartbeatInterval)
		}
	}
}
