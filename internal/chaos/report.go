package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintTable writes one row per result: store, mode, handler, scenario,
// operations, faults fired, doubles, lost, unresolved, time; then a line
// per cell that failed to run, fired no fault, or whose verdict is not
// clean for a reason the columns do not show (a ledger that does not add
// up, an answer overwritten, ...).
func PrintTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "store\tmode\thandler\tscenario\tops\tpayments\tfaults fired\tdoubles\tlost\tunresolved\ttime\t")
	for _, r := range results {
		faults := fmt.Sprintf("%d (%s)", r.FaultCount, r.Faults)
		if r.FaultCount == 0 {
			faults = "0"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%v\t\n",
			r.Store, r.Mode, r.Handler(), r.Scenario, r.Ops, r.Payments, faults,
			r.Doubles, r.Lost, r.Unresolved, r.Took.Round(100*time.Millisecond))
	}
	tw.Flush()
	for _, r := range results {
		name := strings.Join([]string{r.Store, r.Mode, r.Handler(), r.Scenario}, " ")
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %v\n", name, r.Err)
		case r.FaultCount == 0:
			fmt.Fprintf(w, "%s: no fault fired, so the cell proves nothing: give it more operations or a longer -pace\n", name)
		case r.Unkeyed && !lapses(r.Scenario) && r.Doubles != 0:
			fmt.Fprintf(w, "%s: %d doubles though no fault let a lease lapse: a lease did not hold while its holder lived\n", name, r.Doubles)
		case r.BalanceOff != 0:
			fmt.Fprintf(w, "%s: the balance is off by %d from the payments\n", name, r.BalanceOff)
		case r.Overwritten != 0:
			fmt.Fprintf(w, "%s: %d operations answered, after a payment, with an older one: a stale holder overwrote the stored answer\n", name, r.Overwritten)
		case r.Strays != 0:
			fmt.Fprintf(w, "%s: %d payments under keys the client never used\n", name, r.Strays)
		case r.Mismatched != 0:
			fmt.Fprintf(w, "%s: %d payments not as their operation asked (amount, currency or recipient)\n", name, r.Mismatched)
		case r.Refused != 0:
			fmt.Fprintf(w, "%s: %d operations refused (400 or 402) though valid and funded\n", name, r.Refused)
		}
	}
}

// Summary returns the verdict line of a run, and whether it passed: every
// keyed cell clean, every cell run and under at least one fault.
func Summary(results []Result) (string, bool) {
	var ops, doubles, lost, unresolved, refused, overwritten, unkeyedDoubles, unkeyedOps, heldDoubles, heldOps, failed int
	for _, r := range results {
		if !r.OK() {
			failed++
		}
		if r.Unkeyed {
			if lapses(r.Scenario) {
				unkeyedDoubles += r.Doubles
				unkeyedOps += r.Ops
			} else {
				heldDoubles += r.Doubles
				heldOps += r.Ops
			}
			lost += r.Lost
			unresolved += r.Unresolved
			refused += r.Refused
			overwritten += r.Overwritten
			continue
		}
		ops += r.Ops
		doubles += r.Doubles
		lost += r.Lost
		unresolved += r.Unresolved
		refused += r.Refused
		overwritten += r.Overwritten
	}
	verdict := "PASS"
	if failed > 0 {
		verdict = fmt.Sprintf("FAIL (%d of %d cells)", failed, len(results))
	}
	line := fmt.Sprintf("chaos: %s: %d operations with keyed payments: %d doubles, %d lost, %d unresolved", verdict, ops, doubles, lost, unresolved)
	if refused > 0 {
		line += fmt.Sprintf(", %d refused", refused)
	}
	if overwritten > 0 {
		line += fmt.Sprintf(", %d overwritten", overwritten)
	}
	if unkeyedOps > 0 {
		line += fmt.Sprintf("; the unkeyed handler (lease mode without keyed side effects) paid twice %d times in %d operations", unkeyedDoubles, unkeyedOps)
	}
	if heldOps > 0 {
		line += fmt.Sprintf("; with no fault that lets a lease lapse, %d times in %d operations", heldDoubles, heldOps)
	}
	return line, failed == 0
}
