/** The code-execution sandbox: run untrusted Python / JavaScript under layered isolation. */
export {
  runSandboxed,
  processesOfUid,
  processesOfGroup,
  processesWithMarker,
  type SandboxRequest,
  type SandboxResult,
  type SandboxLanguage,
  type IsolationReport,
  type KilledReason,
} from './run.js';
export { probeCapabilities, resetCapabilities, type SandboxCapabilities } from './capabilities.js';
export {
  DEFAULT_LIMITS,
  resolveLimits,
  sandboxLimitsSchema,
  JS_ADDRESS_SPACE_OVERHEAD_MB,
  JS_THREAD_ALLOWANCE,
  type SandboxLimits,
} from './limits.js';
export {
  runHostileSuite,
  HOSTILE_CASES,
  type HostileCase,
  type HostileResult,
  type HostileSuiteResult,
} from './hostile.js';
