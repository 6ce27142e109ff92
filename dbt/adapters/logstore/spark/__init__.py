"""What the adapter needs of Spark, below every stage: statements on the model's connection
(catalog), rows as JSON images, streaming a result out without holding it in the driver,
table formats with their own history, the adapter's own half-made relations, and where the
engine's own output goes."""
