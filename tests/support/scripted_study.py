"""A scripted stand-in for the study: drives a strategy with a score table and a feasibility rule."""

from __future__ import annotations

from tinynas.trial import Trial, TrialState


class ScriptedStudy:
    """Answers proposals like the study does, without training: infeasible at once, else a table score."""

    def __init__(self, score, feasible, parallel: int = 1) -> None:
        self.score = score          # (k, c) -> float
        self.feasible = feasible    # (k, c) -> bool
        self.parallel = parallel
        self.proposals = []         # every (k, c) proposed, in order
        self.proposed = []          # every (k, c, fidelity) proposed, in order
        self.trained = []           # (k, c) that would have been trained
        self.trials = []            # every Trial told, in order

    def trial(self, proposal, number: int) -> Trial:
        arch = proposal.architecture
        if not self.feasible(arch.k, arch.c):
            return Trial(number, arch, proposal.fidelity, TrialState.INFEASIBLE)
        value = self.score(arch.k, arch.c)
        state = TrialState.COMPLETE if value == value else TrialState.FAILED
        return Trial(number, arch, proposal.fidelity, state, score=value if state is TrialState.COMPLETE else None,
                     val_loss=(value,), val_accuracy=(max(0.0, 1 - value),))

    def drive(self, strategy, limit: int = 10_000):
        pending = []
        while len(self.proposals) < limit:
            while len(pending) < self.parallel and not strategy.finished:
                proposal = strategy.ask()
                if proposal is None:
                    break
                arch = proposal.architecture
                self.proposals.append((arch.k, arch.c))
                self.proposed.append((arch.k, arch.c, proposal.fidelity))
                trial = self.trial(proposal, len(self.proposals))
                if trial.state is TrialState.INFEASIBLE:
                    self.trials.append(trial)
                    strategy.tell(trial)
                    continue
                self.trained.append((arch.k, arch.c))
                pending.append(trial)
            if not pending:
                assert strategy.finished, "strategy waits but nothing is pending"
                return self
            # Results come back last-in-first-out, to shake out order dependence.
            trial = pending.pop()
            self.trials.append(trial)
            strategy.tell(trial)
        raise AssertionError("strategy did not finish")

