//! What the command layer needs from a console: a [`Console`] in this process, or nothing at
//! all (no console running means no session).

use ulnet::ProcessId;

use crate::console::{
    BatchInfo, Console, ConsoleError, GroupUpdate, NodeState, SessionInfo, Target, TestSpec,
    TransResult,
};

/// Declares [`Backend`] with one line an operation, and implements it twice from those lines:
/// [`Console`] by calling its method of the same name, [`NoConsole`] by failing with the error
/// after `else`.
macro_rules! backend {
    ($(fn $name:ident(&self $(, $arg:ident: $type:ty)*) -> $ok:ty, else $error:ident;)*) => {
        /// The console operations lst's commands use; see [`Console`] for each.
        #[allow(missing_docs)]
        pub trait Backend {
            $(fn $name(&self $(, $arg: $type)*) -> Result<$ok, ConsoleError>;)*
        }

        impl Backend for Console {
            $(fn $name(&self $(, $arg: $type)*) -> Result<$ok, ConsoleError> {
                Console::$name(self $(, $arg)*)
            })*
        }

        impl Backend for NoConsole {
            $(fn $name(&self $(, _: $type)*) -> Result<$ok, ConsoleError> {
                Err(ConsoleError::$error)
            })*
        }
    };
}

// Before `new_session` the kernel's console has no session to answer from; creating one in a
// process that runs no console fails for want of resources.
backend! {
    fn new_session(
        &self,
        key: u32,
        name: &str,
        timeout_seconds: u32,
        force: bool,
        features: u32
    ) -> SessionInfo, else NoResources;
    fn end_session(&self, key: u32) -> TransResult, else NoSession;
    fn session_info(&self) -> SessionInfo, else NoSession;
    fn debug(&self, key: u32, target: &Target, timeout: u32) -> TransResult, else NoSession;
    fn add_group(&self, key: u32, name: &str) -> (), else NoSession;
    fn add_nodes(&self, key: u32, group: &str, ids: &[ProcessId]) -> TransResult, else NoSession;
    fn del_group(&self, key: u32, name: &str) -> TransResult, else NoSession;
    fn update_group(
        &self,
        key: u32,
        name: &str,
        update: &GroupUpdate
    ) -> TransResult, else NoSession;
    fn groups(&self, key: u32) -> Vec<String>, else NoSession;
    fn group_nodes(&self, key: u32, name: &str) -> Vec<(ProcessId, NodeState)>, else NoSession;
    fn add_batch(&self, key: u32, name: &str) -> (), else NoSession;
    fn batches(&self, key: u32) -> Vec<String>, else NoSession;
    fn batch_info(&self, key: u32, name: &str, test: u32) -> BatchInfo, else NoSession;
    fn batch_nodes(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool
    ) -> Vec<(ProcessId, NodeState)>, else NoSession;
    fn add_test(&self, key: u32, spec: &TestSpec) -> TransResult, else NoSession;
    fn run_batch(&self, key: u32, name: &str, timeout: u32) -> TransResult, else NoSession;
    fn stop_batch(&self, key: u32, name: &str, force: bool) -> TransResult, else NoSession;
    fn query_batch(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
        timeout: u32
    ) -> TransResult, else NoSession;
    fn stat(&self, key: u32, target: &Target, timeout: u32) -> TransResult, else NoSession;
}

/// No console is running: every operation finds no session (as the kernel's console answers
/// before `new_session`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoConsole;
