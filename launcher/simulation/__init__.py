"""`launcher simulate`: replay spot availability traces against the same placement policy objects
the controller uses. Pure: no clocks, no clouds, no files beyond the traces it is given."""
