-- Argo CD health check for connect-offsets.io resources (ConnectCluster, KafkaConnector,
-- KafkaMirrorMaker2). Install it in argocd-cm (see deploy/argocd/README.md).
--
-- Mapping (the operator writes status only through its conditions; there is no phase):
--   no status yet, or status.observedGeneration < metadata.generation   -> Progressing
--   Ready=True                                                         -> Healthy
--   Ready=False, reason Creating/Progressing/TasksNotRunning/
--                StatusUnknown/WaitingForStop                          -> Progressing
--   Ready=False, any other reason (ConnectorFailed, ConnectError,
--                ConnectClusterUnavailable, InvalidSpec, ...)           -> Degraded
--   a problem condition (OffsetsOperationFailed, InvalidAnnotation,
--                AutoRestartExhausted) True while Ready=True            -> Degraded
hs = {}
local progressing_reasons = {
  Creating = true, Progressing = true, TasksNotRunning = true, StatusUnknown = true, WaitingForStop = true,
}
local problems = { OffsetsOperationFailed = true, InvalidAnnotation = true, AutoRestartExhausted = true }

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end
local ready = nil
local problem = nil
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    ready = condition
  elseif problems[condition.type] and condition.status == "True" and problem == nil then
    problem = condition
  end
end
if ready == nil then
  hs.status = "Progressing"
  hs.message = "No Ready condition yet"
elseif ready.status == "True" then
  if problem ~= nil then
    hs.status = "Degraded"
    hs.message = problem.type .. ": " .. (problem.message or "")
  else
    hs.status = "Healthy"
    hs.message = ready.message or ""
  end
elseif progressing_reasons[ready.reason] then
  hs.status = "Progressing"
  hs.message = ready.message or ""
else
  hs.status = "Degraded"
  hs.message = (ready.reason or "") .. ": " .. (ready.message or "")
end
return hs
