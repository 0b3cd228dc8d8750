//! What `#[tool]` fills in: [`ToolSpec`], everything that defines a tool but its body,
//! and [`StateNeed`], a shared state a tool takes.

use std::any::TypeId;

use aaa_guard::{Delivery, GuardOverrides};

use super::ToolAnnotations;
use crate::schema::ParamSpec;

/// A type of shared state a tool needs (see [`State`](crate::State)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateNeed {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
}

impl StateNeed {
    /// The need for a `State<T>`.
    pub fn of<T: Send + Sync + 'static>() -> Self {
        StateNeed {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// The type's name.
    pub fn type_name(&self) -> &'static str {
        self.name
    }
}

/// Everything that defines a tool but its body; what `#[tool]` fills in.
#[doc(hidden)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub params: Vec<ParamSpec>,
    pub requires_approval: bool,
    pub timeout_s: f64,
    pub pool: &'static str,
    pub delivery: Option<Delivery>,
    pub guard: GuardOverrides,
    pub state: Vec<StateNeed>,
    pub blocking: bool,
    pub require_descriptions: bool,
    pub annotations: Option<ToolAnnotations>,
}
