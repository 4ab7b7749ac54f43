package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
)

// A retry loop: Wait after each failure, Reset after the success.
func ExampleBackoff() {
	attempts := 0
	publish := func() error {
		if attempts++; attempts < 4 {
			return errors.New("broker down")
		}
		return nil
	}
	bo := retry.Backoff{Min: 1, Max: 4} // nanoseconds, for the example
	ctx := context.Background()
	for {
		err := publish()
		if err == nil {
			break
		}
		fmt.Printf("attempt %d: %v; retrying in %v\n", attempts, err, bo.Delay(attempts))
		if bo.Wait(ctx) != nil {
			return
		}
	}
	bo.Reset()
	fmt.Println("published after", attempts, "attempts")
	// Output:
	// attempt 1: broker down; retrying in 1ns
	// attempt 2: broker down; retrying in 2ns
	// attempt 3: broker down; retrying in 4ns
	// published after 4 attempts
}

// The same loop with Do: failed reports each error about to be retried,
// and Permanent stops it.
func ExampleDo() {
	attempts := 0
	publish := func(context.Context) error {
		switch attempts++; {
		case attempts < 3:
			return errors.New("broker down")
		case attempts == 3:
			return retry.Permanent(errors.New("message too large"))
		}
		return nil
	}
	bo := retry.Backoff{Min: 1, Max: 4} // nanoseconds, for the example
	err := retry.Do(context.Background(), &bo, publish, func(err error) {
		fmt.Printf("attempt %d: %v; retrying\n", attempts, err)
	})
	fmt.Println("gave up after", attempts, "attempts:", err)
	// Output:
	// attempt 1: broker down; retrying
	// attempt 2: broker down; retrying
	// gave up after 3 attempts: message too large
}
