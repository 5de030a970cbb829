"""``KubeSchedulerConfiguration`` v1 for kubesched: load, default, merge, validate, dump.

Public API (everything else in this package is internal):

- :func:`load_config_file`, :func:`load_config_dict`, :func:`default_config` -> :class:`SchedulerConfiguration`,
  raising :class:`kubesched.errors.ValidationFailed` with every error found; relative file paths in plugin args
  (SecurityAudit's ``policies``, ``data``, ``tokenFile``, ``caFile``; ComplianceScore's ``complianceDataPath``)
  are relative to the configuration file's directory, as paths in a kubeconfig are to the kubeconfig;
- :func:`dump_config` -> the fully-defaulted v1 document (``kubesched config view``);
- :func:`decode_args` / :func:`encode_args` -> typed plugin args from/to their file form;
- the plugin catalog protocol (:class:`PluginDescriptor`, :data:`PluginCatalog`, :data:`EXTENSION_POINTS`)
  that the plugin registry implements and passes in;
- the output types (:class:`SchedulerConfiguration`, :class:`ProfileConfig`, :class:`PluginRef`,
  :class:`LeaderElectionConfig`, :class:`ClientConnectionConfig`).

Users: the runtime that builds one framework per profile, the CLI (``config validate``/``view``, ``run``),
the simulator and the tests.
"""

from .args_decode import decode_args, encode_args
from .catalog import EXTENSION_POINTS, MULTI_POINT, PLUGIN_INTERFACES, PluginCatalog, PluginDescriptor
from .defaults import API_VERSION, DEFAULT_PLUGINS, DEFAULT_SCHEDULER_NAME, KIND
from .dump import dump_config
from .loader import default_config, load_config_dict, load_config_file
from .types import (
    ClientConnectionConfig,
    LeaderElectionConfig,
    PluginRef,
    ProfileConfig,
    SchedulerConfiguration,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_PLUGINS",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "KIND",
    "MULTI_POINT",
    "PLUGIN_INTERFACES",
    "ClientConnectionConfig",
    "LeaderElectionConfig",
    "PluginCatalog",
    "PluginDescriptor",
    "PluginRef",
    "ProfileConfig",
    "SchedulerConfiguration",
    "decode_args",
    "default_config",
    "dump_config",
    "encode_args",
    "load_config_dict",
    "load_config_file",
]
