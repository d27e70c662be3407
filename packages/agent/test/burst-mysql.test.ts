// The burst suite (burst.ts) on MySQL/MariaDB.
import { burstSuite } from "./burst.ts";

await burstSuite("mysql");
