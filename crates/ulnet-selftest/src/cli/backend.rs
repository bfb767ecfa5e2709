//! What the command layer needs from a console: a [`Console`] in this process, or nothing at
//! all (no console running means no session).

use ulnet::ProcessId;

use crate::console::{
    BatchInfo, Console, ConsoleError, GroupUpdate, NodeState, SessionInfo, Target, TestSpec,
    TransResult,
};

/// The console operations lst's commands use; see [`Console`] for each.
#[allow(missing_docs)]
pub trait Backend {
    fn new_session(
        &self,
        key: u32,
        name: &str,
        timeout_seconds: u32,
        force: bool,
        features: u32,
    ) -> Result<SessionInfo, ConsoleError>;
    fn end_session(&self, key: u32) -> Result<TransResult, ConsoleError>;
    fn session_info(&self) -> Result<SessionInfo, ConsoleError>;
    fn debug(&self, key: u32, target: &Target, timeout: u32) -> Result<TransResult, ConsoleError>;
    fn add_group(&self, key: u32, name: &str) -> Result<(), ConsoleError>;
    fn add_nodes(
        &self,
        key: u32,
        group: &str,
        ids: &[ProcessId],
    ) -> Result<TransResult, ConsoleError>;
    fn del_group(&self, key: u32, name: &str) -> Result<TransResult, ConsoleError>;
    fn update_group(
        &self,
        key: u32,
        name: &str,
        update: &GroupUpdate,
    ) -> Result<TransResult, ConsoleError>;
    fn groups(&self, key: u32) -> Result<Vec<String>, ConsoleError>;
    fn group_nodes(
        &self,
        key: u32,
        name: &str,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError>;
    fn add_batch(&self, key: u32, name: &str) -> Result<(), ConsoleError>;
    fn batches(&self, key: u32) -> Result<Vec<String>, ConsoleError>;
    fn batch_info(&self, key: u32, name: &str, test: u32) -> Result<BatchInfo, ConsoleError>;
    fn batch_nodes(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError>;
    fn add_test(&self, key: u32, spec: &TestSpec) -> Result<TransResult, ConsoleError>;
    fn run_batch(&self, key: u32, name: &str, timeout: u32) -> Result<TransResult, ConsoleError>;
    fn stop_batch(&self, key: u32, name: &str, force: bool) -> Result<TransResult, ConsoleError>;
    fn query_batch(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
        timeout: u32,
    ) -> Result<TransResult, ConsoleError>;
    fn stat(&self, key: u32, target: &Target, timeout: u32) -> Result<TransResult, ConsoleError>;
}

impl Backend for Console {
    fn new_session(
        &self,
        key: u32,
        name: &str,
        timeout_seconds: u32,
        force: bool,
        features: u32,
    ) -> Result<SessionInfo, ConsoleError> {
        Console::new_session(self, key, name, timeout_seconds, force, features)
    }
    fn end_session(&self, key: u32) -> Result<TransResult, ConsoleError> {
        Console::end_session(self, key)
    }
    fn session_info(&self) -> Result<SessionInfo, ConsoleError> {
        Console::session_info(self)
    }
    fn debug(&self, key: u32, target: &Target, timeout: u32) -> Result<TransResult, ConsoleError> {
        Console::debug(self, key, target, timeout)
    }
    fn add_group(&self, key: u32, name: &str) -> Result<(), ConsoleError> {
        Console::add_group(self, key, name)
    }
    fn add_nodes(
        &self,
        key: u32,
        group: &str,
        ids: &[ProcessId],
    ) -> Result<TransResult, ConsoleError> {
        Console::add_nodes(self, key, group, ids)
    }
    fn del_group(&self, key: u32, name: &str) -> Result<TransResult, ConsoleError> {
        Console::del_group(self, key, name)
    }
    fn update_group(
        &self,
        key: u32,
        name: &str,
        update: &GroupUpdate,
    ) -> Result<TransResult, ConsoleError> {
        Console::update_group(self, key, name, update)
    }
    fn groups(&self, key: u32) -> Result<Vec<String>, ConsoleError> {
        Console::groups(self, key)
    }
    fn group_nodes(
        &self,
        key: u32,
        name: &str,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        Console::group_nodes(self, key, name)
    }
    fn add_batch(&self, key: u32, name: &str) -> Result<(), ConsoleError> {
        Console::add_batch(self, key, name)
    }
    fn batches(&self, key: u32) -> Result<Vec<String>, ConsoleError> {
        Console::batches(self, key)
    }
    fn batch_info(&self, key: u32, name: &str, test: u32) -> Result<BatchInfo, ConsoleError> {
        Console::batch_info(self, key, name, test)
    }
    fn batch_nodes(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        Console::batch_nodes(self, key, name, test, server)
    }
    fn add_test(&self, key: u32, spec: &TestSpec) -> Result<TransResult, ConsoleError> {
        Console::add_test(self, key, spec)
    }
    fn run_batch(&self, key: u32, name: &str, timeout: u32) -> Result<TransResult, ConsoleError> {
        Console::run_batch(self, key, name, timeout)
    }
    fn stop_batch(&self, key: u32, name: &str, force: bool) -> Result<TransResult, ConsoleError> {
        Console::stop_batch(self, key, name, force)
    }
    fn query_batch(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
        timeout: u32,
    ) -> Result<TransResult, ConsoleError> {
        Console::query_batch(self, key, name, test, server, timeout)
    }
    fn stat(&self, key: u32, target: &Target, timeout: u32) -> Result<TransResult, ConsoleError> {
        Console::stat(self, key, target, timeout)
    }
}

/// No console is running: every operation finds no session (as the kernel's console answers
/// before `new_session`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoConsole;

impl Backend for NoConsole {
    fn new_session(
        &self,
        _: u32,
        _: &str,
        _: u32,
        _: bool,
        _: u32,
    ) -> Result<SessionInfo, ConsoleError> {
        Err(ConsoleError::NoResources)
    }
    fn end_session(&self, _: u32) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn session_info(&self) -> Result<SessionInfo, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn debug(&self, _: u32, _: &Target, _: u32) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn add_group(&self, _: u32, _: &str) -> Result<(), ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn add_nodes(&self, _: u32, _: &str, _: &[ProcessId]) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn del_group(&self, _: u32, _: &str) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn update_group(&self, _: u32, _: &str, _: &GroupUpdate) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn groups(&self, _: u32) -> Result<Vec<String>, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn group_nodes(&self, _: u32, _: &str) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn add_batch(&self, _: u32, _: &str) -> Result<(), ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn batches(&self, _: u32) -> Result<Vec<String>, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn batch_info(&self, _: u32, _: &str, _: u32) -> Result<BatchInfo, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn batch_nodes(
        &self,
        _: u32,
        _: &str,
        _: u32,
        _: bool,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn add_test(&self, _: u32, _: &TestSpec) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn run_batch(&self, _: u32, _: &str, _: u32) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn stop_batch(&self, _: u32, _: &str, _: bool) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn query_batch(
        &self,
        _: u32,
        _: &str,
        _: u32,
        _: bool,
        _: u32,
    ) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
    fn stat(&self, _: u32, _: &Target, _: u32) -> Result<TransResult, ConsoleError> {
        Err(ConsoleError::NoSession)
    }
}
