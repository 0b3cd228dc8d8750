//! [`Limits`]: the budgets of a loop, and the one place they are checked.

use std::time::Duration;

use crate::turn::{AssistantTurn, Usage};

use super::LoopEnd;

/// The budgets of a [`ToolLoop`](crate::ToolLoop): when one is spent, the loop ends
/// with its reason ([`LoopEnd`]) instead of asking for more.
///
/// Turns, tool calls and tokens count the whole run, turns recorded before a restart
/// included (they are read back from the run's facts); wall time counts from the
/// start of this [`run`](crate::ToolLoop::run) (a restarted loop starts its clock
/// anew: no wall clock is trusted across machines or restarts).
///
/// ```
/// use std::time::Duration;
/// use aaa_loop::Limits;
///
/// let limits = Limits::default().with_max_turns(20).with_max_total_tokens(200_000).with_wall_time(Duration::from_secs(300));
/// assert_eq!(limits.max_tool_calls, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The most model turns (10 by default, as in the OpenAI Agents SDK). The calls of
    /// the last allowed turn still run; the loop ends before asking for one more.
    pub max_turns: u32,
    /// The most tool calls over the run, every call a model made counted (calls with
    /// unreadable arguments too). A turn whose calls would go past it is recorded but
    /// none of its calls runs.
    pub max_tool_calls: Option<u32>,
    /// The most tokens ([`Usage::total_tokens`]) over the run's turns. Checked before
    /// each model turn: the turn that crosses it still has its calls run.
    pub max_total_tokens: Option<u64>,
    /// The longest this loop may take. Checked between steps, and a model turn or a
    /// wait for outcomes (a pending approval, a slow tool) is cut short when it
    /// passes; calls already requested go on in the engine.
    pub wall_time: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: 10,
            max_tool_calls: None,
            max_total_tokens: None,
            wall_time: None,
        }
    }
}

impl Limits {
    /// Sets [`max_turns`](Self::max_turns).
    pub fn with_max_turns(mut self, max: u32) -> Self {
        self.max_turns = max;
        self
    }

    /// Sets [`max_tool_calls`](Self::max_tool_calls).
    pub fn with_max_tool_calls(mut self, max: u32) -> Self {
        self.max_tool_calls = Some(max);
        self
    }

    /// Sets [`max_total_tokens`](Self::max_total_tokens).
    pub fn with_max_total_tokens(mut self, max: u64) -> Self {
        self.max_total_tokens = Some(max);
        self
    }

    /// Sets [`wall_time`](Self::wall_time).
    pub fn with_wall_time(mut self, wall_time: Duration) -> Self {
        self.wall_time = Some(wall_time);
        self
    }

    /// The one budget check of the loop: whether the loop must end before taking
    /// `next`, having made `progress` and run for `elapsed`.
    pub(crate) fn exceeded(
        &self,
        progress: &Progress,
        next: Next<'_>,
        elapsed: Duration,
    ) -> Option<LoopEnd> {
        if self.wall_time.is_some_and(|wall| elapsed >= wall) {
            return Some(LoopEnd::WallTime);
        }
        match next {
            Next::Ask => {
                if progress.turns >= self.max_turns {
                    return Some(LoopEnd::MaxTurns);
                }
                let tokens = progress.usage.total_tokens();
                if self.max_total_tokens.is_some_and(|max| tokens >= max) {
                    return Some(LoopEnd::MaxTokens);
                }
            }
            Next::Run(turn) => {
                let calls = u32::try_from(turn.calls.len()).unwrap_or(u32::MAX);
                let total = progress.tool_calls.saturating_add(calls);
                if self.max_tool_calls.is_some_and(|max| total > max) {
                    return Some(LoopEnd::MaxToolCalls);
                }
            }
        }
        None
    }
}

/// What a loop has done so far (the run's, restarts included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Model turns recorded.
    pub(crate) turns: u32,
    /// Tool calls answered (or being answered).
    pub(crate) tool_calls: u32,
    /// Tokens of every recorded turn.
    pub(crate) usage: Usage,
}

impl Progress {
    /// Counts a recorded turn (not its calls: those count when they run).
    pub(crate) fn add_turn(&mut self, turn: &AssistantTurn) {
        self.turns = self.turns.saturating_add(1);
        self.usage += turn.usage;
    }

    /// Counts a turn's calls, about to run.
    pub(crate) fn add_calls(&mut self, turn: &AssistantTurn) {
        let calls = u32::try_from(turn.calls.len()).unwrap_or(u32::MAX);
        self.tool_calls = self.tool_calls.saturating_add(calls);
    }
}

/// The step a loop is about to take.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Next<'a> {
    /// Ask the model for a turn.
    Ask,
    /// Run this turn's calls.
    Run(&'a AssistantTurn),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::{ArgumentsOrProblem, ProviderCall};

    fn progress(turns: u32, tool_calls: u32, tokens: u64) -> Progress {
        Progress {
            turns,
            tool_calls,
            usage: Usage::new(tokens, 0),
        }
    }

    #[test]
    fn each_budget_ends_the_loop_at_its_step() {
        let limits = Limits::default()
            .with_max_turns(3)
            .with_max_tool_calls(4)
            .with_max_total_tokens(1000)
            .with_wall_time(Duration::from_secs(60));
        let second = Duration::from_secs(1);
        let two = AssistantTurn::tool_calls(
            ["a", "b"].map(|id| ProviderCall::new(id, "t", ArgumentsOrProblem::from_text(""))),
        );
        let ok = progress(2, 2, 999);
        assert_eq!(limits.exceeded(&ok, Next::Ask, second), None);
        assert_eq!(limits.exceeded(&ok, Next::Run(&two), second), None);
        let cases = [
            (progress(3, 0, 0), Next::Ask, LoopEnd::MaxTurns),
            (progress(1, 0, 1000), Next::Ask, LoopEnd::MaxTokens),
            (progress(1, 3, 0), Next::Run(&two), LoopEnd::MaxToolCalls),
        ];
        for (progress, next, end) in cases {
            assert_eq!(limits.exceeded(&progress, next, second), Some(end));
        }
        let late = Duration::from_secs(60);
        assert_eq!(
            limits.exceeded(&ok, Next::Ask, late),
            Some(LoopEnd::WallTime)
        );
        assert_eq!(
            Limits::default().exceeded(&progress(9, 1 << 30, u64::MAX), Next::Ask, late),
            None
        );
    }
}
