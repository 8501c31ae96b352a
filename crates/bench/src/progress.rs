//! Terminal progress for a run: an indicatif bar on a terminal, nothing when
//! stderr is piped (CI logs get the final table instead).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::run::Event;
use crate::State;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar over `total` cases when stderr is a terminal.
    pub fn new(total: usize) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(total as u64);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    pub fn event(&self, event: Event<'_>) {
        let Some(bar) = &self.bar else { return };
        match event {
            Event::Start { case, .. } => bar.set_message(case.id.clone()),
            Event::Repetition { case, rep } => bar.set_message(format!(
                "{} (repetition {} {})",
                case.id, rep.repetition, rep.state
            )),
            Event::Done { result, .. } => {
                if result.state != State::Pass {
                    bar.println(format!(
                        "{:<8} {}  {}",
                        result.state, result.case_id, result.reason
                    ));
                } else {
                    bar.println(format!("{:<8} {}", result.state, result.case_id));
                }
                bar.inc(1);
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
