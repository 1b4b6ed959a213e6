//! Typed services a host registers and a tool gets with `ctx.get::<T>()`.

use super::*;

/// Typed services a host gives a call's context ([`ToolContext::get`]),
/// one per type. Cheap to clone.
#[derive(Clone, Default)]
pub struct Services {
    by_type: HashMap<std::any::TypeId, (&'static str, Arc<dyn std::any::Any + Send + Sync>)>,
}

impl Services {
    /// Registers `service` as the `T` of this call (replacing an earlier
    /// `T`).
    pub fn insert<T: Send + Sync + 'static>(&mut self, service: Arc<T>) {
        self.by_type.insert(
            std::any::TypeId::of::<T>(),
            (std::any::type_name::<T>(), service),
        );
    }

    /// The registered `T`: [`ContextError::NoService`] naming the type when
    /// there is none.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ContextError> {
        self.by_type
            .get(&std::any::TypeId::of::<T>())
            .and_then(|(_, s)| s.clone().downcast::<T>().ok())
            .ok_or(ContextError::NoService {
                type_name: std::any::type_name::<T>(),
            })
    }

    /// These services layered over `base`: every type of `base`, except
    /// that a type registered here wins (the same `Arc`s, nothing copied).
    /// How a host gives a call its own services on top of host-wide ones.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use reel::context::Services;
    ///
    /// let mut host = Services::default();
    /// host.insert(Arc::new(String::from("host-wide")));
    /// host.insert(Arc::new(7u32));
    /// let mut call = Services::default();
    /// call.insert(Arc::new(String::from("the call's own")));
    /// let both = call.over(&host);
    /// assert_eq!(*both.get::<String>().unwrap(), "the call's own");
    /// assert_eq!(*both.get::<u32>().unwrap(), 7);
    /// ```
    pub fn over(mut self, base: &Services) -> Services {
        for (id, service) in &base.by_type {
            self.by_type.entry(*id).or_insert_with(|| service.clone());
        }
        self
    }

    /// True when no service is registered.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.by_type.values().map(|(n, _)| *n).collect();
        names.sort_unstable();
        f.debug_set().entries(names).finish()
    }
}

impl ToolContext {
    /// A typed service the host registered for this call (seed 004's
    /// `get(token)`, by type): [`ContextError::NoService`], naming the
    /// type, when none is registered. Live, the host registers services
    /// for every call with `Recorder::service` and for one call with
    /// `CallBuilder::service` (the call's own wins for its type); a child
    /// call of [`ToolContext::dispatch`] gets its parent's services, the
    /// same `Arc`s. In replay, the test registers them with
    /// `ReplayOptions::service`, for every call, children included.
    /// Services are not facts: nothing about them is recorded.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ContextError> {
        self.inner.services.get::<T>()
    }
}
