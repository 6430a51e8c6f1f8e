package jobs

import "testing"

func TestTransitions(t *testing.T) {
	allowed := map[[2]State]bool{}
	for _, p := range [][2]State{
		{Pending, Starting}, {Pending, Suspended}, {Pending, Cancelling}, {Pending, Failed},
		{Starting, Running}, {Starting, Suspended}, {Starting, Cancelling}, {Starting, Failed},
		{Running, Succeeded}, {Running, Failed}, {Running, Suspended}, {Running, Cancelling},
		{Suspended, Starting}, {Suspended, Cancelling}, {Suspended, Failed},
		{Cancelling, Cancelled}, {Cancelling, Failed},
	} {
		allowed[p] = true
	}
	for _, from := range States {
		for _, to := range States {
			if got, want := CanTransition(from, to), allowed[[2]State{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		if from.Terminal() && len(transitions[from]) > 0 {
			t.Errorf("terminal state %s has transitions", from)
		}
	}
	if State("bogus").Valid() || !Cancelling.Valid() {
		t.Error("Valid() wrong")
	}
}
