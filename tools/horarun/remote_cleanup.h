// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// After a failed job, the shared-memory segments its ranks may have left on
// other hosts (a crash before every peer mapped them) are removed there too,
// through the same remote shell that started the ranks.
#pragma once

#include <string>
#include <vector>

namespace hora::horarun {

// The command that removes job `job_id`'s segments on `host` (the job id is
// letters, digits, '.', '_' and '-' only: safe in a shell glob).
std::vector<std::string> RemoteShmCleanupCommand(const std::vector<std::string>& rsh,
                                                 const std::string& host,
                                                 const std::string& job_id);

// Runs the cleanup on every host at once; gives up (killing what is left) after
// timeout_s. Returns how many hosts did not confirm it.
int RemoveRemoteShmSegments(const std::vector<std::string>& rsh,
                            const std::vector<std::string>& hosts, const std::string& job_id,
                            double timeout_s);

}  // namespace hora::horarun
