// The umbrella module for embedders: `import Settee` brings in the whole public API.
@_exported import SetteeCore
@_exported import SetteeStore
@_exported import SetteeReplication
@_exported import SetteeSQLPP
@_exported import SetteeVector
@_exported import SetteeIndex
@_exported import SetteeQuery
